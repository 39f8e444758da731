/*
 * zone_json.c — redins' JSON zones (arvancloud/redins 1.x) into a zone_builder.
 *
 * Decoding follows what redins gets from Go's encoding/json, since the data in the wild was
 * written for it: object keys match case-insensitively and the last of two equal keys wins,
 * unknown keys are ignored, null means "not given", a known key of the wrong type is an error,
 * and integers must be integers (Go refuses 1.0 or 1e3 for an unsigned field). Names inside
 * records are absolute with or without their final dot (redins applies dns.Fqdn); labels (the
 * keys of the zone) are relative to the origin, "@" being the apex.
 *
 * Where redins drops a record when serving it — an A/AAAA without "ip", an NS/MX/SRV without a
 * host, a TXT with empty text — we drop it at load time, silently as redins does. A label is
 * validated and rendered completely before anything of it reaches the builder, so a bad label
 * (the Redis source skips it) leaves no half of itself in the zone.
 */
#include "tern/zone/zone_json.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tern/common/err.h"
#include "tern/common/file.h"
#include "tern/common/grow.h"
#include "tern/common/log.h"
#include "tern/wire/rr.h"
#include "tern/zone/zone_builder.h"

/* redins' default TTL (its handler config "default_ttl" defaults to 300). */
#define DEFAULT_TTL 300u

/* The SOA timers redins puts in a zone config before decoding the stored one over it, so a
 * config that leaves one out gets these (redins handler.LoadZone). */
#define SOA_REFRESH 86400u
#define SOA_RETRY   7200u
#define SOA_EXPIRE  3600u
#define SOA_MINTTL  300u

/* RFC 1035 §3.3: a <character-string> holds at most 255 bytes. */
#define CHARSTR_MAX 255

/* zone_geo_rr_t keeps the counts in a u8 and a u16. */
#define COUNTRIES_MAX UINT8_MAX
#define ASNS_MAX      UINT16_MAX

/* Values quoted in messages are cut to this many bytes: enough to recognise, short enough for a
 * log line. */
#define QUOTE_MAX 64

/* One rendered RR of the label being decoded, waiting for the label to prove valid. */
struct prr {
    uint16_t type;
    uint16_t rdlen;
    uint32_t ttl;
    size_t rdoff;         /* in pend.rd */
    bool geo;             /* A/AAAA: added with zone_builder_add_geo */
    zone_geo_meta_t meta; /* countries/asns point nowhere yet: offsets below */
    size_t cc_off, asn_off;
};

/* An A/AAAA RRset's policy, set after its RRs are added. */
struct ppol {
    uint16_t type;
    zone_geo_policy_t policy;
};

/* An A/AAAA RRset's enabled health_check: every record of it gets an endpoint of this spec with
 * its own address (commit()). The uri and host point into the label's JSON, alive until then. */
struct phc {
    bool on;
    health_spec_t spec;
};

/* The pending label; its arrays are reused from one label to the next (a Redis zone is fed
 * label by label, 100,000 of them for a large one). */
struct pend {
    struct prr *rr;
    size_t n, cap;
    uint8_t *rd;
    size_t rdlen, rdcap;
    uint16_t *cc;
    size_t ncc, cccap;
    uint32_t *asn;
    size_t nasn, asncap;
    struct ppol pol[2];
    unsigned npol;
    struct phc hc[2]; /* [0] A, [1] AAAA */
};

struct zone_json {
    zone_builder_t *b;
    char *source;
    char zname[DNAME_MAXLEN * 4 + 1]; /* origin for messages, without its final dot */
    uint8_t origin[DNAME_MAXLEN];
    size_t origin_len;
    zone_json_opts_t opts;
    uint32_t default_ttl;
    bool have_config;
    bool dnssec;  /* the config says "dnssec": true */
    bool apex_ns; /* an NS RR was added at the apex */
    uint32_t soa_ttl;
    uint8_t soa_rdata[2 * DNAME_MAXLEN + 20];
    uint16_t soa_rdlen;
    struct pend p;
};

/* Where messages come from: "source: zone X <what>: ". */
struct ectx {
    const zone_json_t *zj;
    const char *what; /* "config" or "label www" */
    char *err;
    size_t errlen;
};

static int fail(const struct ectx *e, int rc, const char *fmt, ...) TERN_PRINTF(3, 4);
static int fail(const struct ectx *e, int rc, const char *fmt, ...)
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
static const char *quote(const char *s, size_t len, char buf[QUOTE_MAX + 4])
{
    return tern_escape(buf, QUOTE_MAX + 4, s, len);
}

static const char *type_name(const json_t *v)
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

static void pend_reset(struct pend *p)
{
    p->n = p->rdlen = p->ncc = p->nasn = 0;
    p->npol = 0;
    p->hc[0].on = p->hc[1].on = false;
}

static void pend_free(struct pend *p)
{
    free(p->rr);
    free(p->rd);
    free(p->cc);
    free(p->asn);
}

static int rd_put(struct pend *p, const void *data, size_t len)
{
    if (tern_grow((void **)&p->rd, &p->rdcap, p->rdlen + len, 1) < 0)
        return TERN_ENOMEM;
    if (len)
        memcpy(p->rd + p->rdlen, data, len);
    p->rdlen += len;
    return 0;
}

static int rd_u8(struct pend *p, uint8_t v)
{
    return rd_put(p, &v, 1);
}

static int rd_u16(struct pend *p, uint16_t v)
{
    uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    return rd_put(p, b, 2);
}

/* Close the RR whose RDATA started at rdoff. TERN_ERANGE when the RDATA is too long. */
static int rr_end(struct pend *p, uint16_t type, uint32_t ttl, size_t rdoff)
{
    if (p->rdlen - rdoff > UINT16_MAX)
        return TERN_ERANGE;
    if (tern_grow((void **)&p->rr, &p->cap, p->n + 1, sizeof(*p->rr)) < 0)
        return TERN_ENOMEM;
    p->rr[p->n++] = (struct prr){
        .type = type, .rdlen = (uint16_t)(p->rdlen - rdoff), .ttl = ttl, .rdoff = rdoff};
    return 0;
}

/* ---- names ------------------------------------------------------------------------------- */

/* ---- JSON access ------------------------------------------------------------------------- */

/* obj's member key, matched as encoding/json does (ASCII case-insensitively, the last of equal
 * keys winning); NULL when absent or null. obj must be an object. */
static json_t *field(json_t *obj, const char *key)
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
static const char *pathf(char *dst, size_t len, const char *fmt, ...) TERN_PRINTF(3, 4);
static const char *pathf(char *dst, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, len, fmt, ap);
    va_end(ap);
    return dst;
}

/* "base.key" (or "key" at the top) into dst. */
static const char *join(char *dst, size_t len, const char *base, const char *key)
{
    return pathf(dst, len, "%s%s%s", base, *base ? "." : "", key);
}

/* Path strings: "a.records[65535].country[254]" and the like. */
#define PATH_MAX_LEN 96

/* Unsigned integer field: *out unchanged when absent (*found false). */
static int get_uint(const struct ectx *e, json_t *obj, const char *base, const char *key,
                    uint64_t max, uint64_t *out, bool *found)
{
    char path[PATH_MAX_LEN];
    json_t *v = field(obj, key);
    if (found)
        *found = v != NULL;
    if (!v)
        return 0;
    if (!json_is_integer(v))
        return fail(e, TERN_EINVAL, "%s: expected an integer, got %s",
                    join(path, sizeof(path), base, key), type_name(v));
    json_int_t i = json_integer_value(v);
    if (i < 0 || (uint64_t)i > max)
        return fail(e, TERN_EINVAL, "%s: %" JSON_INTEGER_FORMAT " is out of range (0 to %llu)",
                    join(path, sizeof(path), base, key), i, (unsigned long long)max);
    *out = (uint64_t)i;
    return 0;
}

static int get_u32(const struct ectx *e, json_t *obj, const char *base, const char *key,
                   uint32_t max, uint32_t *out)
{
    uint64_t v = *out;
    int rc = get_uint(e, obj, base, key, max, &v, NULL);
    *out = (uint32_t)v;
    return rc;
}

/* String field: *s NULL when absent. */
static int get_str(const struct ectx *e, json_t *obj, const char *base, const char *key,
                   const char **s, size_t *len)
{
    char path[PATH_MAX_LEN];
    json_t *v = field(obj, key);
    *s = NULL;
    *len = 0;
    if (!v)
        return 0;
    if (!json_is_string(v))
        return fail(e, TERN_EINVAL, "%s: expected a string, got %s",
                    join(path, sizeof(path), base, key), type_name(v));
    *s = json_string_value(v);
    *len = json_string_length(v);
    return 0;
}

/* Object field: *o NULL when absent. */
static int get_obj(const struct ectx *e, json_t *obj, const char *base, const char *key, json_t **o)
{
    char path[PATH_MAX_LEN];
    json_t *v = field(obj, key);
    *o = NULL;
    if (!v)
        return 0;
    if (!json_is_object(v))
        return fail(e, TERN_EINVAL, "%s: expected an object, got %s",
                    join(path, sizeof(path), base, key), type_name(v));
    *o = v;
    return 0;
}

static int get_bool(const struct ectx *e, json_t *obj, const char *base, const char *key, bool *b)
{
    char path[PATH_MAX_LEN];
    json_t *v = field(obj, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return fail(e, TERN_EINVAL, "%s: expected true or false, got %s",
                    join(path, sizeof(path), base, key), type_name(v));
    *b = json_is_true(v);
    return 0;
}

/* A name field (absolute) into out; *len 0 when absent or "" (callers decide what that means). */
static int get_name(const struct ectx *e, json_t *obj, const char *base, const char *key,
                    uint8_t *out, size_t *len)
{
    char path[PATH_MAX_LEN], q[QUOTE_MAX + 4];
    const char *s, *why;
    size_t slen;
    int rc = get_str(e, obj, base, key, &s, &slen);
    *len = 0;
    if (rc < 0 || !s || slen == 0)
        return rc;
    int n = dname_from_str(s, slen, false, out, &why);
    if (n < 0)
        return fail(e, TERN_EINVAL, "%s: \"%s\": %s", join(path, sizeof(path), base, key),
                    quote(s, slen, q), why);
    *len = (size_t)n;
    return 0;
}

/* The RRset's TTL: "ttl", 0 or absent meaning the default. */
static int get_ttl(const struct ectx *e, json_t *set, const char *base, uint32_t *ttl)
{
    uint32_t v = 0;
    int rc = get_u32(e, set, base, "ttl", WIRE_TTL_MAX, &v);
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
static int get_records(const struct ectx *e, json_t *set, const char *base, json_t **arr)
{
    char path[PATH_MAX_LEN];
    json_t *v = field(set, "records");
    *arr = NULL;
    if (!v)
        return 0;
    join(path, sizeof(path), base, "records");
    if (!json_is_array(v))
        return fail(e, TERN_EINVAL, "%s: expected an array, got %s", path, type_name(v));
    size_t cap = rrset_cap(e->zj);
    if (json_array_size(v) > cap)
        return fail(e, TERN_ELIMIT, "%s: %zu records, more than %s%zu%s", path, json_array_size(v),
                    cap < ZONE_BUILDER_MAX_RRSET_RRS ? "max_rrset_records (" : "", cap,
                    cap < ZONE_BUILDER_MAX_RRSET_RRS ? ")" : " (what an RRset can hold)");
    size_t i;
    json_t *r;
    json_array_foreach(v, i, r)
    {
        if (!json_is_object(r))
            return fail(e, TERN_EINVAL, "%s[%zu]: expected an object, got %s", path, i,
                        type_name(r));
    }
    *arr = v;
    return 0;
}

static int nomem(const struct ectx *e)
{
    return fail(e, TERN_ENOMEM, "out of memory");
}

/* rr_end with its errors as messages; path names the record. */
static int finish_rr(const struct ectx *e, struct pend *p, uint16_t type, uint32_t ttl,
                     size_t rdoff, const char *path)
{
    int rc = rr_end(p, type, ttl, rdoff);
    if (rc == TERN_ERANGE)
        return fail(e, TERN_EINVAL, "%s: RDATA longer than 65535 bytes", path);
    if (rc < 0)
        return nomem(e);
    return 0;
}

/* ---- A and AAAA -------------------------------------------------------------------------- */

/* redins takes one value or an array of them ("country": "US" or ["US", "CA"]). The number of
 * values of v, after checking its shape (scalar_ok: v is one value) and the bound. */
static int one_or_many(const struct ectx *e, json_t *v, const char *path, bool scalar_ok,
                       const char *what, size_t max, size_t *n)
{
    if (!json_is_array(v) && !scalar_ok)
        return fail(e, TERN_EINVAL, "%s: expected a %s or an array of %ss, got %s", path, what,
                    what, type_name(v));
    *n = json_is_array(v) ? json_array_size(v) : 1;
    if (*n > max)
        return fail(e, TERN_EINVAL, "%s: more than %zu values", path, max);
    return 0;
}

/* Value i of such a v, and its path for messages ("a.records[0].asn[1]", or the path itself). */
static json_t *one_or_many_at(json_t *v, size_t i, const char *path, char *epath, size_t len)
{
    if (!json_is_array(v)) {
        pathf(epath, len, "%s", path);
        return v;
    }
    pathf(epath, len, "%s[%zu]", path, i);
    return json_array_get(v, i);
}

static int parse_countries(const struct ectx *e, struct pend *p, json_t *rec, const char *base,
                           struct prr *r)
{
    char path[PATH_MAX_LEN], epath[PATH_MAX_LEN], q[QUOTE_MAX + 4];
    json_t *v = field(rec, "country");
    r->cc_off = p->ncc;
    if (!v)
        return 0;
    join(path, sizeof(path), base, "country");
    size_t n;
    int rc = one_or_many(e, v, path, json_is_string(v), "string", COUNTRIES_MAX, &n);
    if (rc < 0)
        return rc;
    if (tern_grow((void **)&p->cc, &p->cccap, p->ncc + n, sizeof(*p->cc)) < 0)
        return nomem(e);
    for (size_t i = 0; i < n; i++) {
        json_t *c = one_or_many_at(v, i, path, epath, sizeof(epath));
        if (!json_is_string(c))
            return fail(e, TERN_EINVAL, "%s: expected a string, got %s", epath, type_name(c));
        const char *s = json_string_value(c);
        size_t len = json_string_length(c);
        uint16_t code;
        if (len == 0) {
            code = 0; /* redins' "": the fallback for clients of unknown or unlisted country */
        } else if (len == 2 && isalpha((unsigned char)s[0]) && isalpha((unsigned char)s[1]) &&
                   (unsigned char)s[0] < 0x80 && (unsigned char)s[1] < 0x80) {
            code = ZONE_CC(toupper((unsigned char)s[0]), toupper((unsigned char)s[1]));
        } else {
            return fail(e, TERN_EINVAL, "%s: \"%s\" is not a two-letter country code", epath,
                        quote(s, len, q));
        }
        p->cc[p->ncc++] = code;
    }
    r->meta.ncountries = n;
    return 0;
}

static int parse_asns(const struct ectx *e, struct pend *p, json_t *rec, const char *base,
                      struct prr *r)
{
    char path[PATH_MAX_LEN], epath[PATH_MAX_LEN];
    json_t *v = field(rec, "asn");
    r->asn_off = p->nasn;
    if (!v)
        return 0;
    join(path, sizeof(path), base, "asn");
    size_t n;
    int rc = one_or_many(e, v, path, json_is_number(v), "number", ASNS_MAX, &n);
    if (rc < 0)
        return rc;
    if (tern_grow((void **)&p->asn, &p->asncap, p->nasn + n, sizeof(*p->asn)) < 0)
        return nomem(e);
    for (size_t i = 0; i < n; i++) {
        json_t *a = one_or_many_at(v, i, path, epath, sizeof(epath));
        if (!json_is_integer(a))
            return fail(e, TERN_EINVAL, "%s: expected an integer, got %s", epath, type_name(a));
        json_int_t x = json_integer_value(a);
        if (x < 0 || x > (json_int_t)UINT32_MAX)
            return fail(e, TERN_EINVAL, "%s: %" JSON_INTEGER_FORMAT " is not an AS number", epath,
                        x);
        p->asn[p->nasn++] = (uint32_t)x; /* 0: redins' fallback set, like country "" */
    }
    r->meta.nasns = n;
    return 0;
}

static int parse_filter(const struct ectx *e, json_t *set, const char *base, zone_geo_policy_t *pol,
                        bool *present)
{
    static const char *const counts[] = {
        [ZONE_GEO_COUNT_MULTI] = "multi", [ZONE_GEO_COUNT_SINGLE] = "single"};
    static const char *const orders[] = {[ZONE_GEO_ORDER_NONE] = "none",
                                         [ZONE_GEO_ORDER_WEIGHTED] = "weighted",
                                         [ZONE_GEO_ORDER_RR] = "rr"};
    static const char *const filters[] = {[ZONE_GEO_FILTER_NONE] = "none",
                                          [ZONE_GEO_FILTER_COUNTRY] = "country",
                                          [ZONE_GEO_FILTER_ASN] = "asn",
                                          [ZONE_GEO_FILTER_ASN_COUNTRY] = "asn+country",
                                          [ZONE_GEO_FILTER_LOCATION] = "location"};
    static const struct {
        const char *key;
        const char *const *names;
        size_t count;
        const char *expect;
    } fields[] = {
        {"count", counts, 2, "multi or single"},
        {"order", orders, 3, "none, weighted or rr"},
        {"geo_filter", filters, 5, "none, country, location, asn or asn+country"},
    };
    char path[PATH_MAX_LEN], q[QUOTE_MAX + 4];
    json_t *f;
    int rc = get_obj(e, set, base, "filter", &f);
    *present = f != NULL;
    *pol = (zone_geo_policy_t){0};
    if (rc < 0 || !f)
        return rc;
    join(path, sizeof(path), base, "filter");
    uint8_t val[3] = {0, 0, 0};
    for (size_t k = 0; k < 3; k++) {
        const char *s;
        size_t len;
        if ((rc = get_str(e, f, path, fields[k].key, &s, &len)) < 0)
            return rc;
        if (!s || len == 0)
            continue; /* redins' default */
        /* exact: redins compares exactly and would treat "Single" as the default, so accepting
         * it here in any case would serve something redins does not */
        size_t i;
        for (i = 0; i < fields[k].count; i++)
            if (strlen(fields[k].names[i]) == len && memcmp(fields[k].names[i], s, len) == 0)
                break;
        if (i == fields[k].count) {
            char fpath[PATH_MAX_LEN];
            return fail(e, TERN_EINVAL, "%s: \"%s\" is not one of %s",
                        join(fpath, sizeof(fpath), path, fields[k].key), quote(s, len, q),
                        fields[k].expect);
        }
        val[k] = (uint8_t)i;
    }
    pol->count = val[0];
    pol->order = val[1];
    pol->filter = val[2];
    return 0;
}

/* redins' health_check of an A/AAAA RRset (handler/healthcheck.go), with tern's additions:
 *   enable (false: ignored), protocol http|https|ping|icmp (and tcp), uri, port (redins built
 *   its URL without it; tern checks it: 80 http, 443 https when left out), up_count,
 *   down_count (redins' sign: -3 or 3 are the same), timeout (ms; 0 or none: 1000);
 *   tern: method HEAD|GET, expect (a status code or a list), tls_verify (default true), host
 *   (the Host header and TLS name; default the owner).
 * Disabled or absent: hc->on false. A bad value of an enabled check fails the label. */
static int parse_health(const struct ectx *e, json_t *set, const char *base, struct phc *hc)
{
    char path[PATH_MAX_LEN], q[QUOTE_MAX + 4], why[128];
    json_t *o;
    bool enable = false;
    int rc = get_obj(e, set, base, "health_check", &o);
    hc->on = false;
    if (rc < 0 || !o)
        return rc;
    join(path, sizeof(path), base, "health_check");
    if ((rc = get_bool(e, o, path, "enable", &enable)) < 0 || !enable)
        return rc;
    health_spec_t *sp = &hc->spec;
    health_spec_init(sp);
    const char *str;
    size_t len;
    char fpath[PATH_MAX_LEN];
    if ((rc = get_str(e, o, path, "protocol", &str, &len)) < 0)
        return rc;
    if (str && len) {
        int proto = health_proto_parse(str, len);
        if (proto < 0)
            return fail(e, TERN_EINVAL,
                        "%s: \"%s\" is not a check protocol (http, https, tcp, "
                        "ping or icmp)",
                        join(fpath, sizeof(fpath), path, "protocol"), quote(str, len, q));
        sp->proto = (uint8_t)proto;
    }
    sp->port = health_spec_default_port(sp->proto);
    static const struct {
        const char *key;
        long long min, max;
    } ints[] = {{"port", 0, 65535},
                {"up_count", INT32_MIN, INT32_MAX},
                {"down_count", INT32_MIN, INT32_MAX},
                {"timeout", INT32_MIN, INT32_MAX}};
    long long v[4];
    bool found[4];
    for (size_t i = 0; i < 4; i++) {
        json_t *x = field(o, ints[i].key);
        found[i] = x != NULL;
        if (!x)
            continue;
        join(fpath, sizeof(fpath), path, ints[i].key);
        if (!json_is_integer(x))
            return fail(e, TERN_EINVAL, "%s: expected an integer, got %s", fpath, type_name(x));
        v[i] = json_integer_value(x);
        if (v[i] < ints[i].min || v[i] > ints[i].max)
            return fail(e, TERN_EINVAL, "%s: %lld is out of range", fpath, v[i]);
    }
    if (found[0])
        sp->port = (uint16_t)v[0];
    if (sp->proto == HEALTH_TCP && !found[0])
        return fail(e, TERN_EINVAL, "%s: a tcp check needs a port",
                    join(fpath, sizeof(fpath), path, "port"));
    if (sp->proto == HEALTH_ICMP)
        sp->port = 0; /* redins' data carries a port for ping checks too: it means nothing */
    if (found[1])
        sp->up_count = v[1] > INT16_MAX ? INT16_MAX : v[1] < INT16_MIN ? INT16_MIN : (int16_t)v[1];
    if (found[2]) {
        long long d = v[2] > 0 ? -v[2] : v[2]; /* redins negates a positive down_count */
        sp->down_count = d < INT16_MIN ? INT16_MIN : (int16_t)d;
    }
    if (found[3]) {
        if (v[3] < 0)
            return fail(e, TERN_EINVAL, "%s: %lld is negative (milliseconds)",
                        join(fpath, sizeof(fpath), path, "timeout"), v[3]);
        sp->timeout_ms = v[3] == 0           ? HEALTH_DEFAULT_TIMEOUT_MS
                         : v[3] > UINT32_MAX ? UINT32_MAX
                                             : (uint32_t)v[3];
    }
    if ((rc = get_str(e, o, path, "uri", &str, &len)) < 0)
        return rc;
    if (str && len) {
        if (strlen(str) != len)
            return fail(e, TERN_EINVAL, "%s: contains a NUL",
                        join(fpath, sizeof(fpath), path, "uri"));
        sp->uri = str;
    }
    if ((rc = get_str(e, o, path, "method", &str, &len)) < 0)
        return rc;
    if (str && len) {
        if (len == 4 && memcmp(str, "HEAD", 4) == 0)
            sp->method = HEALTH_HEAD;
        else if (len == 3 && memcmp(str, "GET", 3) == 0)
            sp->method = HEALTH_GET;
        else
            return fail(e, TERN_EINVAL, "%s: \"%s\" is not HEAD or GET",
                        join(fpath, sizeof(fpath), path, "method"), quote(str, len, q));
    }
    json_t *x = field(o, "expect");
    if (x) {
        size_t n;
        join(fpath, sizeof(fpath), path, "expect");
        if ((rc = one_or_many(e, x, fpath, json_is_integer(x), "integer", HEALTH_MAX_EXPECT, &n)) <
            0)
            return rc;
        for (size_t i = 0; i < n; i++) {
            char epath[PATH_MAX_LEN];
            json_t *c = one_or_many_at(x, i, fpath, epath, sizeof(epath));
            if (!json_is_integer(c) || json_integer_value(c) < 100 || json_integer_value(c) > 599)
                return fail(e, TERN_EINVAL, "%s: expected an HTTP status code (100..599)", epath);
            sp->expect[sp->nexpect++] = (uint16_t)json_integer_value(c);
        }
    }
    if ((rc = get_bool(e, o, path, "tls_verify", &sp->tls_verify)) < 0)
        return rc;
    if ((rc = get_str(e, o, path, "host", &str, &len)) < 0)
        return rc;
    if (str && len) {
        if (strlen(str) != len)
            return fail(e, TERN_EINVAL, "%s: contains a NUL",
                        join(fpath, sizeof(fpath), path, "host"));
        sp->host = str;
    }
    if (health_spec_check(sp, why, sizeof(why)) < 0)
        return fail(e, TERN_EINVAL, "%s: %s", path, why);
    hc->on = true;
    return 0;
}

static int parse_ip(const struct ectx *e, struct pend *p, json_t *set, const char *key,
                    uint16_t type)
{
    const zone_json_opts_t *o = &e->zj->opts;
    int family = type == WIRE_T_A ? 4 : 6;
    int af = type == WIRE_T_A ? AF_INET : AF_INET6;
    size_t alen = type == WIRE_T_A ? 4 : 16;
    char path[PATH_MAX_LEN], q[QUOTE_MAX + 4];
    json_t *recs;
    uint32_t ttl;
    zone_geo_policy_t pol;
    bool has_pol;
    int rc;
    if ((rc = get_ttl(e, set, key, &ttl)) < 0 || (rc = get_records(e, set, key, &recs)) < 0 ||
        (rc = parse_filter(e, set, key, &pol, &has_pol)) < 0 ||
        (rc = parse_health(e, set, key, &p->hc[type == WIRE_T_AAAA])) < 0)
        return rc;
    size_t i, added = 0;
    json_t *rec;
    json_array_foreach(recs, i, rec)
    {
        pathf(path, sizeof(path), "%s.records[%zu]", key, i);
        const char *s;
        size_t slen;
        uint8_t addr[16];
        if ((rc = get_str(e, rec, path, "ip", &s, &slen)) < 0)
            return rc;
        if (!s || slen == 0)
            continue; /* redins skips a record without an address */
        if (strlen(s) != slen || inet_pton(af, s, addr) != 1) {
            char fpath[PATH_MAX_LEN];
            uint8_t other[16];
            bool v4 = strlen(s) == slen && inet_pton(AF_INET, s, other) == 1;
            return fail(e, TERN_EINVAL, "%s: \"%s\" is not an IPv%d address%s",
                        join(fpath, sizeof(fpath), path, "ip"), quote(s, slen, q), family,
                        type == WIRE_T_AAAA && v4 ? " (an IPv4 address belongs under \"a\")" : "");
        }
        struct prr r = {0};
        uint64_t w = 0;
        if ((rc = parse_countries(e, p, rec, path, &r)) < 0 ||
            (rc = parse_asns(e, p, rec, path, &r)) < 0 ||
            (rc = get_uint(e, rec, path, "weight", UINT32_MAX, &w, NULL)) < 0)
            return rc;
        r.meta.weight = (uint32_t)w;
        if (o->locate) {
            double lat, lon;
            if (o->locate(o->locate_ctx, family, addr, &lat, &lon)) {
                if (fabs(lat) <= 90.0 && fabs(lon) <= 180.0) {
                    r.meta.has_location = true;
                    r.meta.lat = lat;
                    r.meta.lon = lon;
                } else {
                    log_warn("%s: zone %s %s: %s: location %g,%g out of range, ignored",
                             e->zj->source, e->zj->zname, e->what, path, lat, lon);
                }
            }
        }
        size_t rdoff = p->rdlen;
        if (rd_put(p, addr, alen) < 0)
            return nomem(e);
        if ((rc = finish_rr(e, p, type, ttl, rdoff, path)) < 0)
            return rc;
        struct prr *last = &p->rr[p->n - 1];
        last->geo = true;
        last->meta = r.meta;
        last->cc_off = r.cc_off;
        last->asn_off = r.asn_off;
        added++;
    }
    if (has_pol && added)
        p->pol[p->npol++] = (struct ppol){.type = type, .policy = pol};
    return 0;
}

/* ---- the other types --------------------------------------------------------------------- */

static int parse_cname(const struct ectx *e, struct pend *p, json_t *set, const char *key,
                       uint16_t type)
{
    uint8_t name[DNAME_MAXLEN];
    size_t nlen;
    uint32_t ttl;
    int rc;
    const char *field_name = type == WIRE_T_PTR     ? "domain"
                             : type == WIRE_T_ANAME ? "location"
                                                    : "host";
    if ((rc = get_ttl(e, set, key, &ttl)) < 0 ||
        (rc = get_name(e, set, key, field_name, name, &nlen)) < 0)
        return rc;
    if (!nlen)
        return fail(e, TERN_EINVAL, "%s.%s: missing", key, field_name);
    size_t rdoff = p->rdlen;
    if (rd_put(p, name, nlen) < 0)
        return nomem(e);
    return finish_rr(e, p, type, ttl, rdoff, key);
}

static int parse_txt(const struct ectx *e, struct pend *p, json_t *set, const char *key,
                     uint16_t type)
{
    char path[PATH_MAX_LEN];
    json_t *recs, *rec;
    uint32_t ttl;
    size_t i;
    int rc;
    if ((rc = get_ttl(e, set, key, &ttl)) < 0 || (rc = get_records(e, set, key, &recs)) < 0)
        return rc;
    json_array_foreach(recs, i, rec)
    {
        pathf(path, sizeof(path), "%s.records[%zu]", key, i);
        const char *s;
        size_t len;
        if ((rc = get_str(e, rec, path, "text", &s, &len)) < 0)
            return rc;
        if (!s || len == 0)
            continue; /* redins skips an empty text */
        /* redins' split255: consecutive <character-string>s of 255 bytes, the last one shorter
         * (redins adds an empty string after a text whose length is a multiple of 255; we do not
         * copy that slip, the text is the same) */
        size_t rdoff = p->rdlen;
        for (size_t off = 0; off < len; off += CHARSTR_MAX) {
            size_t n = len - off < CHARSTR_MAX ? len - off : CHARSTR_MAX;
            if (rd_u8(p, (uint8_t)n) < 0 || rd_put(p, s + off, n) < 0)
                return nomem(e);
        }
        if ((rc = finish_rr(e, p, type, ttl, rdoff, path)) < 0)
            return rc;
    }
    return 0;
}

/* NS, MX and SRV: a name after some integers; a record without its name is skipped, as redins
 * does. */
static int parse_hosted(const struct ectx *e, struct pend *p, json_t *set, const char *key,
                        uint16_t type)
{
    char path[PATH_MAX_LEN];
    json_t *recs, *rec;
    uint32_t ttl;
    size_t i;
    int rc;
    if ((rc = get_ttl(e, set, key, &ttl)) < 0 || (rc = get_records(e, set, key, &recs)) < 0)
        return rc;
    json_array_foreach(recs, i, rec)
    {
        pathf(path, sizeof(path), "%s.records[%zu]", key, i);
        uint8_t name[DNAME_MAXLEN];
        size_t nlen;
        uint32_t pref = 0, prio = 0, weight = 0, port = 0;
        if (type == WIRE_T_MX) {
            if ((rc = get_u32(e, rec, path, "preference", UINT16_MAX, &pref)) < 0)
                return rc;
        } else if (type == WIRE_T_SRV) {
            if ((rc = get_u32(e, rec, path, "priority", UINT16_MAX, &prio)) < 0 ||
                (rc = get_u32(e, rec, path, "weight", UINT16_MAX, &weight)) < 0 ||
                (rc = get_u32(e, rec, path, "port", UINT16_MAX, &port)) < 0)
                return rc;
        }
        if ((rc = get_name(e, rec, path, type == WIRE_T_SRV ? "target" : "host", name, &nlen)) < 0)
            return rc;
        if (!nlen)
            continue;
        size_t rdoff = p->rdlen;
        if (type == WIRE_T_MX && rd_u16(p, (uint16_t)pref) < 0)
            return nomem(e);
        if (type == WIRE_T_SRV &&
            (rd_u16(p, (uint16_t)prio) < 0 || rd_u16(p, (uint16_t)weight) < 0 ||
             rd_u16(p, (uint16_t)port) < 0))
            return nomem(e);
        if (rd_put(p, name, nlen) < 0)
            return nomem(e);
        if ((rc = finish_rr(e, p, type, ttl, rdoff, path)) < 0)
            return rc;
    }
    return 0;
}

static int parse_caa(const struct ectx *e, struct pend *p, json_t *set, const char *key,
                     uint16_t type)
{
    char path[PATH_MAX_LEN], fpath[PATH_MAX_LEN], q[QUOTE_MAX + 4];
    json_t *recs, *rec;
    uint32_t ttl;
    size_t i;
    int rc;
    if ((rc = get_ttl(e, set, key, &ttl)) < 0 || (rc = get_records(e, set, key, &recs)) < 0)
        return rc;
    json_array_foreach(recs, i, rec)
    {
        pathf(path, sizeof(path), "%s.records[%zu]", key, i);
        uint32_t flag = 0;
        const char *tag, *value;
        size_t tlen, vlen;
        if ((rc = get_u32(e, rec, path, "flag", UINT8_MAX, &flag)) < 0 ||
            (rc = get_str(e, rec, path, "tag", &tag, &tlen)) < 0 ||
            (rc = get_str(e, rec, path, "value", &value, &vlen)) < 0)
            return rc;
        /* RFC 8659 §4.1: the tag is 1 to 255 ASCII letters and digits */
        bool ok = tag && tlen >= 1 && tlen <= 255;
        for (size_t k = 0; ok && k < tlen; k++)
            ok = isalnum((unsigned char)tag[k]) && (unsigned char)tag[k] < 0x80;
        if (!ok)
            return fail(e, TERN_EINVAL, "%s: \"%s\" is not a CAA tag (1 to 255 letters and digits)",
                        join(fpath, sizeof(fpath), path, "tag"), tag ? quote(tag, tlen, q) : "");
        size_t rdoff = p->rdlen;
        if (rd_u8(p, (uint8_t)flag) < 0 || rd_u8(p, (uint8_t)tlen) < 0 ||
            rd_put(p, tag, tlen) < 0 || rd_put(p, value ? value : "", vlen) < 0)
            return nomem(e);
        if ((rc = finish_rr(e, p, type, ttl, rdoff, path)) < 0)
            return rc;
    }
    return 0;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int parse_tlsa(const struct ectx *e, struct pend *p, json_t *set, const char *key,
                      uint16_t type)
{
    char path[PATH_MAX_LEN], fpath[PATH_MAX_LEN], q[QUOTE_MAX + 4];
    json_t *recs, *rec;
    uint32_t ttl;
    size_t i;
    int rc;
    if ((rc = get_ttl(e, set, key, &ttl)) < 0 || (rc = get_records(e, set, key, &recs)) < 0)
        return rc;
    json_array_foreach(recs, i, rec)
    {
        pathf(path, sizeof(path), "%s.records[%zu]", key, i);
        uint32_t usage = 0, selector = 0, mtype = 0;
        const char *hex;
        size_t hlen;
        if ((rc = get_u32(e, rec, path, "usage", UINT8_MAX, &usage)) < 0 ||
            (rc = get_u32(e, rec, path, "selector", UINT8_MAX, &selector)) < 0 ||
            (rc = get_u32(e, rec, path, "matching_type", UINT8_MAX, &mtype)) < 0 ||
            (rc = get_str(e, rec, path, "certificate", &hex, &hlen)) < 0)
            return rc;
        join(fpath, sizeof(fpath), path, "certificate");
        if (!hex || hlen == 0)
            return fail(e, TERN_EINVAL, "%s: missing", fpath);
        if (hlen % 2)
            return fail(e, TERN_EINVAL, "%s: odd number of hex digits", fpath);
        size_t rdoff = p->rdlen;
        if (rd_u8(p, (uint8_t)usage) < 0 || rd_u8(p, (uint8_t)selector) < 0 ||
            rd_u8(p, (uint8_t)mtype) < 0)
            return nomem(e);
        for (size_t k = 0; k < hlen; k += 2) {
            int hi = hexval((unsigned char)hex[k]), lo = hexval((unsigned char)hex[k + 1]);
            if (hi < 0 || lo < 0)
                return fail(e, TERN_EINVAL, "%s: \"%s\" is not hexadecimal", fpath,
                            quote(hex, hlen, q));
            if (rd_u8(p, (uint8_t)(hi << 4 | lo)) < 0)
                return nomem(e);
        }
        if ((rc = finish_rr(e, p, type, ttl, rdoff, path)) < 0)
            return rc;
    }
    return 0;
}

typedef int (*parse_fn)(const struct ectx *e, struct pend *p, json_t *set, const char *key,
                        uint16_t type);

/* The RRset keys of a label, in the order they are decoded (that order shows only in which error
 * of a label with several is reported). */
static const struct {
    const char *key;
    uint16_t type;
    parse_fn parse;
} rrset_keys[] = {
    {"a", WIRE_T_A, parse_ip},
    {"aaaa", WIRE_T_AAAA, parse_ip},
    {"cname", WIRE_T_CNAME, parse_cname},
    {"txt", WIRE_T_TXT, parse_txt},
    {"ns", WIRE_T_NS, parse_hosted},
    {"mx", WIRE_T_MX, parse_hosted},
    {"srv", WIRE_T_SRV, parse_hosted},
    {"caa", WIRE_T_CAA, parse_caa},
    {"ptr", WIRE_T_PTR, parse_cname},
    {"tlsa", WIRE_T_TLSA, parse_tlsa},
    {"aname", WIRE_T_ANAME, parse_cname}, /* {"location": target}: answer.h says how it answers */
};

/* ---- the zone ---------------------------------------------------------------------------- */

zone_json_t *zone_json_new(const char *origin, const char *source, const zone_json_opts_t *opts,
                           char *err, size_t errlen)
{
    const char *why = NULL;
    if (errlen)
        err[0] = 0;
    if (!source)
        source = origin ? origin : "(null)";
    zone_json_t *zj = calloc(1, sizeof(*zj));
    if (!zj)
        goto nomem;
    int n = origin ? dname_from_str(origin, strlen(origin), false, zj->origin, &why) : -1;
    if (n < 0) {
        snprintf(err, errlen, "%s: bad zone origin '%s'%s%s", source, origin ? origin : "",
                 why ? ": " : "", why ? why : "");
        free(zj);
        return NULL;
    }
    zj->origin_len = (size_t)n;
    if (opts)
        zj->opts = *opts;
    zj->default_ttl = zj->opts.default_ttl ? zj->opts.default_ttl : DEFAULT_TTL;
    if (dname_to_str(zj->origin, zj->zname, sizeof(zj->zname)) < 0)
        goto nomem;
    size_t zl = strlen(zj->zname);
    if (zl > 1 && zj->zname[zl - 1] == '.')
        zj->zname[zl - 1] = 0;
    zj->source = strdup(source);
    zj->b = zone_builder_new(zj->origin, source);
    if (!zj->source || !zj->b)
        goto nomem;
    if (zj->opts.health_fn)
        zone_builder_set_health(zj->b, zj->opts.health_fn, zj->opts.health_ctx);
    if (zj->opts.dnskeys &&
        zone_builder_set_dnssec(zj->b, zj->opts.dnskeys, zj->opts.dnskeys_len, 0) < 0)
        goto nomem;
    return zj;
nomem:
    snprintf(err, errlen, "%s: out of memory", source);
    zone_json_free(zj);
    return NULL;
}

void zone_json_free(zone_json_t *zj)
{
    if (!zj)
        return;
    zone_builder_free(zj->b);
    pend_free(&zj->p);
    free(zj->source);
    free(zj);
}

static int config_obj(zone_json_t *zj, json_t *cfg, char *err, size_t errlen)
{
    struct ectx e = {.zj = zj, .what = "config", .err = err, .errlen = errlen};
    json_t *soa;
    int rc;
    if (zj->have_config)
        return fail(&e, TERN_EINVAL, "given twice");
    if (!json_is_object(cfg))
        return fail(&e, TERN_EINVAL, "expected an object, got %s", type_name(cfg));
    if ((rc = get_obj(&e, cfg, "", "soa", &soa)) < 0)
        return rc;
    if (!soa)
        return fail(&e, TERN_EINVAL, "soa: missing");

    uint8_t ns[DNAME_MAXLEN], mbox[DNAME_MAXLEN];
    size_t nslen, mboxlen;
    uint32_t ttl, refresh = SOA_REFRESH, retry = SOA_RETRY, expire = SOA_EXPIRE,
                  minttl = SOA_MINTTL, serial = 0;
    bool have_serial = false;
    uint64_t s64 = 0;
    if ((rc = get_name(&e, soa, "soa", "ns", ns, &nslen)) < 0 ||
        (rc = get_name(&e, soa, "soa", "mbox", mbox, &mboxlen)) < 0 ||
        (rc = get_ttl(&e, soa, "soa", &ttl)) < 0 ||
        (rc = get_u32(&e, soa, "soa", "refresh", UINT32_MAX, &refresh)) < 0 ||
        (rc = get_u32(&e, soa, "soa", "retry", UINT32_MAX, &retry)) < 0 ||
        (rc = get_u32(&e, soa, "soa", "expire", UINT32_MAX, &expire)) < 0 ||
        (rc = get_u32(&e, soa, "soa", "minttl", UINT32_MAX, &minttl)) < 0 ||
        (rc = get_uint(&e, soa, "soa", "serial", UINT32_MAX, &s64, &have_serial)) < 0)
        return rc;
    if (!nslen)
        return fail(&e, TERN_EINVAL, "soa.ns: missing");
    if (!mboxlen)
        return fail(&e, TERN_EINVAL, "soa.mbox: missing");
    /* redins stamps its SOA with the load time; a config that gives no serial gets that too */
    serial = have_serial ? (uint32_t)s64 : (uint32_t)time(NULL);

    bool dnssec = false, flatten = false;
    const char *domain_id;
    size_t idlen;
    if ((rc = get_bool(&e, cfg, "", "dnssec", &dnssec)) < 0 ||
        (rc = get_bool(&e, cfg, "", "cname_flattening", &flatten)) < 0 ||
        (rc = get_str(&e, cfg, "", "domain_id", &domain_id, &idlen)) < 0)
        return rc;
    /* kept for the request log's domain_uuid, as redins logs it */
    if (domain_id && (rc = zone_builder_set_domain_id(zj->b, domain_id, idlen)) < 0)
        return fail(&e, rc, "domain_id: %s",
                    rc == TERN_EINVAL ? "longer than 255 bytes" : "out of memory");
    /* redins turns DNSSEC off silently when it cannot use the keys; a zone that says it is
     * signed and cannot be is an error here, so the old version keeps serving */
    zj->dnssec = dnssec;
    if (dnssec && !zj->opts.dnskeys && !zj->opts.dnssec_deferred)
        return fail(&e, TERN_EINVAL,
                    "\"dnssec\" is true but the zone has no keys (ternd.yaml: the zone's dnssec: "
                    "keys; Redis: redins:zones:<zone>:ksk/zsk)");
    if (flatten)
        log_warn("%s: zone %s: \"cname_flattening\" is set but tern answers with the CNAME",
                 zj->source, zj->zname);

    uint8_t *d = zj->soa_rdata;
    memcpy(d, ns, nslen);
    d += nslen;
    memcpy(d, mbox, mboxlen);
    d += mboxlen;
    uint32_t v[5] = {serial, refresh, retry, expire, minttl};
    for (int i = 0; i < 5; i++) {
        *d++ = (uint8_t)(v[i] >> 24);
        *d++ = (uint8_t)(v[i] >> 16);
        *d++ = (uint8_t)(v[i] >> 8);
        *d++ = (uint8_t)v[i];
    }
    zj->soa_rdlen = (uint16_t)(d - zj->soa_rdata);
    zj->soa_ttl = ttl;
    zj->have_config = true;
    return 0;
}

/* Parse len bytes of JSON; NULL with a message (what names the part) on a syntax error. */
static json_t *parse_text(const struct ectx *e, const char *json, size_t len)
{
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_ALLOW_NUL, &je);
    char text[TERN_ESCAPE_MAX(sizeof(je.text))];
    if (!root) /* jansson quotes the input ("... near 'x'"), so escape it */
        fail(e, TERN_ESYNTAX, "JSON syntax error at line %d column %d: %s", je.line, je.column,
             tern_escape(text, sizeof(text), je.text, strlen(je.text)));
    return root;
}

int zone_json_config(zone_json_t *zj, const char *json, size_t len, char *err, size_t errlen)
{
    struct ectx e = {.zj = zj, .what = "config", .err = err, .errlen = errlen};
    if (errlen)
        err[0] = 0;
    json_t *root = parse_text(&e, json, len);
    if (!root)
        return TERN_ESYNTAX;
    int rc = config_obj(zj, root, err, errlen);
    json_decref(root);
    return rc;
}

/* Add what the label rendered into zj->p to the builder. */
/* The endpoint that checks record r of the label at owner, as its RRset's health_check says:
 * the check's spec with r's address, and the owner as host unless the check names one
 * (redins keys its state by owner and address). *ep NULL when unchecked. */
static int record_health(zone_json_t *zj, const struct ectx *e, const uint8_t *owner,
                         const struct prr *r, health_ep_t **ep)
{
    const struct phc *hc = &zj->p.hc[r->type == WIRE_T_AAAA];
    *ep = NULL;
    if (!hc->on || !zj->opts.health)
        return 0;
    health_spec_t sp = hc->spec;
    char host[DNAME_MAXLEN * 4 + 1];
    sp.family = r->type == WIRE_T_A ? 4 : 6;
    memcpy(sp.addr, zj->p.rd + r->rdoff, r->rdlen);
    if (!sp.host) {
        uint8_t lc[DNAME_MAXLEN];
        (void)dname_lower(lc, owner);
        size_t n = dname_to_str(lc, host, sizeof(host)) > 0 ? strlen(host) : 0;
        if (n > 1 && host[n - 1] == '.')
            host[n - 1] = '\0';
        sp.host = host;
    }
    if (!(*ep = health_intern(zj->opts.health, &sp)))
        return nomem(e);
    return 0;
}

static int commit(zone_json_t *zj, const struct ectx *e, const uint8_t *owner, bool apex)
{
    struct pend *p = &zj->p;
    for (size_t i = 0; i < p->n; i++) {
        struct prr *r = &p->rr[i];
        int rc;
        if (r->geo) {
            zone_geo_meta_t m = r->meta;
            m.countries = m.ncountries ? p->cc + r->cc_off : NULL;
            m.asns = m.nasns ? p->asn + r->asn_off : NULL;
            if ((rc = record_health(zj, e, owner, r, &m.health)) < 0)
                return rc;
            rc = zone_builder_add_geo(zj->b, owner, r->type, r->ttl, p->rd + r->rdoff, r->rdlen, &m,
                                      NULL, 0);
            health_ep_release(m.health); /* the builder holds its own */
        } else {
            rc = zone_builder_add(zj->b, owner, r->type, 1, r->ttl, p->rd + r->rdoff, r->rdlen,
                                  NULL, 0);
        }
        if (rc < 0)
            return fail(e, rc, "%s", zone_builder_error(zj->b));
        if (apex && r->type == WIRE_T_NS)
            zj->apex_ns = true;
    }
    for (unsigned i = 0; i < p->npol; i++) {
        int rc = zone_builder_set_policy(zj->b, owner, p->pol[i].type, &p->pol[i].policy);
        if (rc < 0)
            return fail(e, rc, "%s", zone_builder_error(zj->b));
    }
    return 0;
}

/* The RDATA of each RRset the label rendered (with the length prefixes the zone stores) against
 * what the builder takes: the other per-RRset limit that would otherwise fail the whole zone. */
static int check_rrset_bytes(const struct ectx *e, const struct pend *p)
{
    for (size_t k = 0; k < sizeof(rrset_keys) / sizeof(rrset_keys[0]); k++) {
        uint64_t bytes = 0;
        for (size_t i = 0; i < p->n; i++)
            if (p->rr[i].type == rrset_keys[k].type)
                bytes += 2u + p->rr[i].rdlen;
        if (bytes > ZONE_BUILDER_MAX_RRSET_BYTES)
            return fail(e, TERN_ELIMIT, "%s: %llu bytes of RDATA, more than an RRset can hold",
                        rrset_keys[k].key, (unsigned long long)bytes);
    }
    return 0;
}

/* One label's object into the builder. one_owner: refuse a label whose owner an earlier label
 * already gave (the incremental API's rule, see zone_json_label()). */
static int label_obj(zone_json_t *zj, const char *label, json_t *obj, bool one_owner, char *err,
                     size_t errlen)
{
    char what[QUOTE_MAX + 16], q[QUOTE_MAX + 4];
    snprintf(what, sizeof(what), "label %s", quote(label, strlen(label), q));
    struct ectx e = {.zj = zj, .what = what, .err = err, .errlen = errlen};
    struct pend *p = &zj->p;
    int rc;

    /* the owner: "@" is the apex, anything else is relative to it */
    uint8_t owner[DNAME_MAXLEN];
    bool apex = strcmp(label, "@") == 0;
    if (apex) {
        memcpy(owner, zj->origin, zj->origin_len);
    } else {
        const char *why;
        int n = dname_from_str(label, strlen(label), true, owner, &why);
        if (n < 0)
            return fail(&e, TERN_EINVAL, "bad label: %s", why);
        if ((size_t)n + zj->origin_len > DNAME_MAXLEN)
            return fail(&e, TERN_EINVAL, "bad label: name longer than 255 bytes");
        memcpy(owner + n, zj->origin, zj->origin_len);
    }
    /* "www" and "WWW" (or "\119ww") are two labels but one owner: their data together could
     * break a rule of the zone (a CNAME beside the other's data, one RRset over its cap) that
     * only finish() would see, failing every version of the zone. The first one added stays. */
    if (one_owner && zone_builder_has_owner(zj->b, owner)) {
        uint8_t lc[DNAME_MAXLEN];
        char oname[DNAME_MAXLEN * 4 + 1];
        (void)dname_lower(lc, owner);
        (void)dname_to_str(lc, oname, sizeof(oname));
        return fail(&e, TERN_EEXIST,
                    "%s is given by another label already (labels that differ only in case "
                    "or escapes name one owner)",
                    oname);
    }
    if (!json_is_object(obj))
        return fail(&e, TERN_EINVAL, "expected an object, got %s", type_name(obj));

    pend_reset(p);
    bool cname = false;
    for (size_t k = 0; k < sizeof(rrset_keys) / sizeof(rrset_keys[0]); k++) {
        json_t *set;
        if ((rc = get_obj(&e, obj, "", rrset_keys[k].key, &set)) < 0)
            return rc;
        if (!set)
            continue;
        size_t before = p->n;
        if ((rc = rrset_keys[k].parse(&e, p, set, rrset_keys[k].key, rrset_keys[k].type)) < 0)
            return rc;
        if (rrset_keys[k].type == WIRE_T_CNAME && p->n > before)
            cname = true;
    }
    /* RFC 1034 §3.6.2 (and RFC 2181 §10.1): caught here rather than by the builder's finish so
     * that it costs the label, not the zone */
    if (cname && (p->n > 1 || apex))
        return fail(&e, TERN_EINVAL, "cname: a CNAME cannot be beside other data%s",
                    apex ? " (the apex has the SOA)" : "");
    if ((rc = check_rrset_bytes(&e, p)) < 0)
        return rc;
    return commit(zj, &e, owner, apex);
}

int zone_json_label(zone_json_t *zj, const char *label, const char *json, size_t len, char *err,
                    size_t errlen)
{
    char what[QUOTE_MAX + 16], q[QUOTE_MAX + 4];
    snprintf(what, sizeof(what), "label %s", quote(label, strlen(label), q));
    struct ectx e = {.zj = zj, .what = what, .err = err, .errlen = errlen};
    if (errlen)
        err[0] = 0;
    json_t *root = parse_text(&e, json, len);
    if (!root)
        return TERN_ESYNTAX;
    int rc = label_obj(zj, label, root, true, err, errlen);
    json_decref(root);
    return rc;
}

bool zone_json_dnssec(const zone_json_t *zj)
{
    return zj->dnssec;
}

int zone_json_set_dnssec(zone_json_t *zj, const uint8_t *dnskeys, size_t len)
{
    return zone_builder_set_dnssec(zj->b, dnskeys, len, 0);
}

int zone_json_finish(zone_json_t *zj, zone_t **out, char *err, size_t errlen)
{
    int rc;
    *out = NULL;
    if (errlen)
        err[0] = 0;
    if (!zj->have_config) {
        snprintf(err, errlen, "%s: zone %s: no SOA (zone config missing)", zj->source, zj->zname);
        rc = TERN_ENOSOA;
        goto fail;
    }
    rc = zone_builder_add(zj->b, zj->origin, WIRE_T_SOA, 1, zj->soa_ttl, zj->soa_rdata,
                          zj->soa_rdlen, NULL, 0);
    if (rc < 0) {
        snprintf(err, errlen, "%s", zone_builder_error(zj->b));
        goto fail;
    }
    if (!zj->apex_ns) {
        /* redins needs no NS RRset, the builder (and every resolver asking) does: the SOA's
         * primary server is the one name we know serves the zone */
        const uint8_t *mname = zj->soa_rdata;
        size_t mlen = dname_len(mname);
        char nbuf[DNAME_MAXLEN * 4 + 1];
        (void)dname_to_str(mname, nbuf, sizeof(nbuf));
        rc = zone_builder_add(zj->b, zj->origin, WIRE_T_NS, 1, zj->soa_ttl, mname, (uint16_t)mlen,
                              NULL, 0);
        if (rc < 0) {
            snprintf(err, errlen, "%s", zone_builder_error(zj->b));
            goto fail;
        }
        log_info("%s: zone %s: no NS at the apex, serving NS %s (the SOA's primary)", zj->source,
                 zj->zname, nbuf);
    }
    zone_builder_t *b = zj->b;
    zj->b = NULL;
    rc = zone_builder_finish(b, out, err, errlen);
fail:
    zone_json_free(zj);
    return rc;
}

int zone_json_load_file(const char *origin, const char *path, const zone_json_opts_t *opts,
                        zone_t **out, char *err, size_t errlen)
{
    json_t *root = NULL;
    zone_json_t *zj = NULL;
    int rc;
    *out = NULL;
    if (errlen)
        err[0] = 0;

    /* a regular file only (a FIFO must not hang the loader); jansson reads it as a stream */
    struct stat st;
    int fd = tern_open_regular(path, 0, &st, err, errlen);
    if (fd < 0)
        return fd;
    FILE *fp = fdopen(fd, "r");
    if (!fp) {
        rc = -errno;
        close(fd);
        snprintf(err, errlen, "%s: %s", path, tern_strerror(rc));
        return rc;
    }
    json_error_t je;
    root = json_loadf(fp, JSON_ALLOW_NUL, &je);
    fclose(fp);
    if (!root) {
        snprintf(err, errlen, "%s:%d:%d: %s", path, je.line, je.column, je.text);
        return TERN_ESYNTAX;
    }
    if (!(zj = zone_json_new(origin, path, opts, err, errlen))) {
        rc = TERN_EINVAL;
        goto fail;
    }
    if (!json_is_object(root)) {
        snprintf(err, errlen, "%s: zone %s: expected an object with \"config\" and \"records\"",
                 path, zj->zname);
        rc = TERN_EINVAL;
        goto fail;
    }
    json_t *cfg = NULL, *recs = NULL;
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v)
    {
        if (strcasecmp(k, "config") == 0) {
            cfg = v;
        } else if (strcasecmp(k, "records") == 0) {
            recs = v;
        } else {
            char q[QUOTE_MAX + 4];
            snprintf(err, errlen,
                     "%s: zone %s: unknown key \"%s\" (expected \"config\" and "
                     "\"records\")",
                     path, zj->zname, quote(k, strlen(k), q));
            rc = TERN_EINVAL;
            goto fail;
        }
    }
    if (!json_is_object(cfg)) {
        snprintf(err, errlen, "%s: zone %s: \"config\" %s", path, zj->zname,
                 cfg ? "must be an object" : "missing");
        rc = TERN_EINVAL;
        goto fail;
    }
    if (!json_is_object(recs)) {
        snprintf(err, errlen, "%s: zone %s: \"records\" %s", path, zj->zname,
                 recs ? "must be an object" : "missing");
        rc = TERN_EINVAL;
        goto fail;
    }
    if ((rc = config_obj(zj, cfg, err, errlen)) < 0)
        goto fail;
    json_object_foreach(recs, k, v)
    {
        if ((rc = label_obj(zj, k, v, false, err, errlen)) < 0)
            goto fail;
    }
    json_decref(root);
    return zone_json_finish(zj, out, err, errlen);
fail:
    zone_json_free(zj);
    json_decref(root);
    return rc;
}
