/*
 * zone_json_rrset.c — a label's RRsets ("a", "aaaa", "cname", "txt"...) rendered to RDATA.
 *
 * Each RRset key has its parser; what it renders waits in the label's pending arrays (struct
 * pend) until the whole label proves valid (zone_json.c commits it). Where redins drops a record
 * when serving it — an A/AAAA without "ip", an NS/MX/SRV without a host, a TXT with empty text —
 * we drop it here, silently as redins does. A and AAAA carry redins' geo metadata per record
 * (country, asn, weight, a location from the locate hook) and two blocks per RRset: "filter"
 * (the steering policy) and "health_check". Beyond redins (issue 33): a record's "priority"
 * (its failover tier), and in "filter" "min_healthy", "sticky_prefix" and order "sticky".
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/log.h"
#include "tern/geo/latency_group.h"
#include "tern/wire/rr.h"
#include "zone_json_int.h"

/* RFC 1035 §3.3: a <character-string> holds at most 255 bytes. */
#define CHARSTR_MAX 255

/* zone_geo_rr_t keeps the counts in a u8 and a u16. */
#define COUNTRIES_MAX UINT8_MAX
#define ASNS_MAX      UINT16_MAX

void zone_json_rrset_reset(struct pend *p)
{
    p->n = p->rdlen = p->ncc = p->nasn = 0;
    p->npol = 0;
    p->hc[0].on = p->hc[1].on = false;
}

void zone_json_rrset_free(struct pend *p)
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

/* rr_end with its errors as messages; path names the record. */
static int finish_rr(const struct ectx *e, struct pend *p, uint16_t type, uint32_t ttl,
                     size_t rdoff, const char *path)
{
    int rc = rr_end(p, type, ttl, rdoff);
    if (rc == TERN_ERANGE)
        return zone_json_fail(e, TERN_EINVAL, "%s: RDATA longer than 65535 bytes", path);
    if (rc < 0)
        return zone_json_nomem(e);
    return 0;
}

/* ---- A and AAAA -------------------------------------------------------------------------- */

static int parse_countries(const struct ectx *e, struct pend *p, json_t *rec, const char *base,
                           struct prr *r)
{
    char path[PATH_MAX_LEN], epath[PATH_MAX_LEN], q[QUOTE_MAX + 4];
    json_t *v = zone_json_field(rec, "country");
    r->cc_off = p->ncc;
    if (!v)
        return 0;
    zone_json_join(path, sizeof(path), base, "country");
    size_t n;
    int rc = zone_json_one_or_many(e, v, path, json_is_string(v), "string", COUNTRIES_MAX, &n);
    if (rc < 0)
        return rc;
    if (tern_grow((void **)&p->cc, &p->cccap, p->ncc + n, sizeof(*p->cc)) < 0)
        return zone_json_nomem(e);
    for (size_t i = 0; i < n; i++) {
        json_t *c = zone_json_one_or_many_at(v, i, path, epath, sizeof(epath));
        if (!json_is_string(c))
            return zone_json_fail(e, TERN_EINVAL, "%s: expected a string, got %s", epath,
                                  zone_json_type_name(c));
        const char *s = json_string_value(c);
        size_t len = json_string_length(c);
        uint16_t code;
        if (len == 0) {
            code = 0; /* redins' "": the fallback for clients of unknown or unlisted country */
        } else if (len == 2 && isalpha((unsigned char)s[0]) && isalpha((unsigned char)s[1]) &&
                   (unsigned char)s[0] < 0x80 && (unsigned char)s[1] < 0x80) {
            code = ZONE_CC(toupper((unsigned char)s[0]), toupper((unsigned char)s[1]));
        } else {
            return zone_json_fail(e, TERN_EINVAL, "%s: \"%s\" is not a two-letter country code",
                                  epath, zone_json_quote(s, len, q));
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
    json_t *v = zone_json_field(rec, "asn");
    r->asn_off = p->nasn;
    if (!v)
        return 0;
    zone_json_join(path, sizeof(path), base, "asn");
    size_t n;
    int rc = zone_json_one_or_many(e, v, path, json_is_number(v), "number", ASNS_MAX, &n);
    if (rc < 0)
        return rc;
    if (tern_grow((void **)&p->asn, &p->asncap, p->nasn + n, sizeof(*p->asn)) < 0)
        return zone_json_nomem(e);
    for (size_t i = 0; i < n; i++) {
        json_t *a = zone_json_one_or_many_at(v, i, path, epath, sizeof(epath));
        if (!json_is_integer(a))
            return zone_json_fail(e, TERN_EINVAL, "%s: expected an integer, got %s", epath,
                                  zone_json_type_name(a));
        json_int_t x = json_integer_value(a);
        if (x < 0 || x > (json_int_t)UINT32_MAX)
            return zone_json_fail(e, TERN_EINVAL,
                                  "%s: %" JSON_INTEGER_FORMAT " is not an AS number", epath, x);
        p->asn[p->nasn++] = (uint32_t)x; /* 0: redins' fallback set, like country "" */
    }
    r->meta.nasns = n;
    return 0;
}

/* The record's "group" (its PoP in the latency map, tern/geo/latency_group.h), into r->meta. */
static int parse_group(const struct ectx *e, json_t *rec, const char *base, struct prr *r)
{
    char fpath[PATH_MAX_LEN], q[QUOTE_MAX + 4];
    const char *s;
    size_t len;
    int rc = zone_json_get_str(e, rec, base, "group", &s, &len);
    if (rc < 0 || !s)
        return rc;
    if (!latency_group_valid(s, len))
        return zone_json_fail(e, TERN_EINVAL,
                              "%s: \"%s\" is not a group name (1..%u characters of a-z, 0-9, _ "
                              "and -)",
                              zone_json_join(fpath, sizeof(fpath), base, "group"),
                              zone_json_quote(s, len, q), LATENCY_GROUP_MAX);
    r->meta.group = latency_group_id(s, len);
    r->meta.group_name = s; /* in the label's JSON, alive until commit() copies it */
    r->meta.group_len = len;
    return 0;
}

/* filter.min_healthy (issue 33, failover tiers): a number for every tier, or an object
 * {"<priority>": N} for the tiers it lists (the others need 1). */
static int parse_min_healthy(const struct ectx *e, json_t *f, const char *fpath,
                             zone_geo_policy_t *pol)
{
    char path[PATH_MAX_LEN], epath[PATH_MAX_LEN], q[QUOTE_MAX + 4];
    json_t *v = zone_json_field(f, "min_healthy");
    if (!v)
        return 0;
    zone_json_join(path, sizeof(path), fpath, "min_healthy");
    if (json_is_integer(v)) {
        uint64_t n = 0;
        int rc = zone_json_get_uint(e, f, fpath, "min_healthy", UINT16_MAX, &n, NULL);
        if (rc < 0)
            return rc;
        if (n == 0)
            return zone_json_fail(e, TERN_EINVAL, "%s: 0 is out of range (1 to 65535)", path);
        pol->min_healthy = (uint16_t)n;
        return 0;
    }
    if (!json_is_object(v))
        return zone_json_fail(e, TERN_EINVAL, "%s: expected a number or an object, got %s", path,
                              zone_json_type_name(v));
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x)
    {
        char *end;
        zone_json_pathf(epath, sizeof(epath), "%s.%s", path, zone_json_quote(k, strlen(k), q));
        unsigned long prio = strtoul(k, &end, 10);
        if (!*k || *end || !isdigit((unsigned char)k[0]) || prio > UINT16_MAX)
            return zone_json_fail(e, TERN_EINVAL, "%s: the key is not a priority (0 to 65535)",
                                  epath);
        if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > UINT16_MAX)
            return zone_json_fail(e, TERN_EINVAL, "%s: expected an integer 1 to 65535", epath);
        unsigned i;
        for (i = 0; i < pol->nmin && pol->min[i].priority != prio; i++)
            ;
        if (i == ZONE_GEO_TIERS_MAX)
            return zone_json_fail(e, TERN_EINVAL, "%s: more than %d tiers listed", path,
                                  ZONE_GEO_TIERS_MAX);
        pol->min[i] = (zone_geo_min_t){(uint16_t)prio, (uint16_t)json_integer_value(x)};
        if (i == pol->nmin)
            pol->nmin++;
    }
    return 0;
}

/* filter.sticky_prefix: {"v4": N, "v6": N}, the bits of the client's network the sticky order
 * hashes (0 or absent: the server's steering: default). */
static int parse_sticky_prefix(const struct ectx *e, json_t *f, const char *fpath,
                               zone_geo_policy_t *pol)
{
    char path[PATH_MAX_LEN];
    json_t *o;
    int rc = zone_json_get_obj(e, f, fpath, "sticky_prefix", &o);
    if (rc < 0 || !o)
        return rc;
    zone_json_join(path, sizeof(path), fpath, "sticky_prefix");
    uint32_t v4 = 0, v6 = 0;
    if ((rc = zone_json_get_u32(e, o, path, "v4", 32, &v4)) < 0 ||
        (rc = zone_json_get_u32(e, o, path, "v6", 128, &v6)) < 0)
        return rc;
    pol->sticky_v4 = (uint8_t)v4;
    pol->sticky_v6 = (uint8_t)v6;
    return 0;
}

static int parse_filter(const struct ectx *e, json_t *set, const char *base, zone_geo_policy_t *pol,
                        bool *present)
{
    static const char *const counts[] = {
        [ZONE_GEO_COUNT_MULTI] = "multi", [ZONE_GEO_COUNT_SINGLE] = "single"};
    static const char *const orders[] = {[ZONE_GEO_ORDER_NONE] = "none",
                                         [ZONE_GEO_ORDER_WEIGHTED] = "weighted",
                                         [ZONE_GEO_ORDER_RR] = "rr",
                                         [ZONE_GEO_ORDER_STICKY] = "sticky"};
    static const char *const filters[] = {
        [ZONE_GEO_FILTER_NONE] = "none",         [ZONE_GEO_FILTER_COUNTRY] = "country",
        [ZONE_GEO_FILTER_ASN] = "asn",           [ZONE_GEO_FILTER_ASN_COUNTRY] = "asn+country",
        [ZONE_GEO_FILTER_LOCATION] = "location", [ZONE_GEO_FILTER_LATENCY] = "latency"};
    static const struct {
        const char *key;
        const char *const *names;
        size_t count;
        const char *expect;
    } fields[] = {
        {"count", counts, 2, "multi or single"},
        {"order", orders, 4, "none, weighted or rr (redins' orders), or sticky"},
        {"geo_filter", filters, 6,
         "none, country, location, asn or asn+country, or latency (with a latency_map)"},
    };
    char path[PATH_MAX_LEN], q[QUOTE_MAX + 4];
    json_t *f;
    int rc = zone_json_get_obj(e, set, base, "filter", &f);
    *present = f != NULL;
    *pol = (zone_geo_policy_t){0};
    if (rc < 0 || !f)
        return rc;
    zone_json_join(path, sizeof(path), base, "filter");
    uint8_t val[3] = {0, 0, 0};
    for (size_t k = 0; k < 3; k++) {
        const char *s;
        size_t len;
        if ((rc = zone_json_get_str(e, f, path, fields[k].key, &s, &len)) < 0)
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
            return zone_json_fail(e, TERN_EINVAL, "%s: \"%s\" is not one of %s",
                                  zone_json_join(fpath, sizeof(fpath), path, fields[k].key),
                                  zone_json_quote(s, len, q), fields[k].expect);
        }
        val[k] = (uint8_t)i;
    }
    pol->count = val[0];
    pol->order = val[1];
    pol->filter = val[2];
    if ((rc = parse_min_healthy(e, f, path, pol)) < 0 ||
        (rc = parse_sticky_prefix(e, f, path, pol)) < 0)
        return rc;
    return 0;
}

/* health_check.protocol (default http) and the protocol's default port. */
static int health_protocol(const struct ectx *e, json_t *o, const char *path, health_spec_t *sp)
{
    char fpath[PATH_MAX_LEN], q[QUOTE_MAX + 4];
    const char *str;
    size_t len;
    int rc;
    if ((rc = zone_json_get_str(e, o, path, "protocol", &str, &len)) < 0)
        return rc;
    if (str && len) {
        int proto = health_proto_parse(str, len);
        if (proto < 0)
            return zone_json_fail(e, TERN_EINVAL,
                                  "%s: \"%s\" is not a check protocol (http, https, tcp, "
                                  "ping or icmp)",
                                  zone_json_join(fpath, sizeof(fpath), path, "protocol"),
                                  zone_json_quote(str, len, q));
        sp->proto = (uint8_t)proto;
    }
    sp->port = health_spec_default_port(sp->proto);
    return 0;
}

/* health_check's numbers: port (tcp needs one, icmp has none), up_count, down_count (either
 * sign), timeout (ms). */
static int health_numbers(const struct ectx *e, json_t *o, const char *path, health_spec_t *sp)
{
    char fpath[PATH_MAX_LEN];
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
        json_t *x = zone_json_field(o, ints[i].key);
        found[i] = x != NULL;
        if (!x)
            continue;
        zone_json_join(fpath, sizeof(fpath), path, ints[i].key);
        if (!json_is_integer(x))
            return zone_json_fail(e, TERN_EINVAL, "%s: expected an integer, got %s", fpath,
                                  zone_json_type_name(x));
        v[i] = json_integer_value(x);
        if (v[i] < ints[i].min || v[i] > ints[i].max)
            return zone_json_fail(e, TERN_EINVAL, "%s: %lld is out of range", fpath, v[i]);
    }
    if (found[0])
        sp->port = (uint16_t)v[0];
    if (sp->proto == HEALTH_TCP && !found[0])
        return zone_json_fail(e, TERN_EINVAL, "%s: a tcp check needs a port",
                              zone_json_join(fpath, sizeof(fpath), path, "port"));
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
            return zone_json_fail(e, TERN_EINVAL, "%s: %lld is negative (milliseconds)",
                                  zone_json_join(fpath, sizeof(fpath), path, "timeout"), v[3]);
        sp->timeout_ms = v[3] == 0           ? HEALTH_DEFAULT_TIMEOUT_MS
                         : v[3] > UINT32_MAX ? UINT32_MAX
                                             : (uint32_t)v[3];
    }
    return 0;
}

/* health_check's HTTP settings: uri, method, expect, tls_verify, host (uri and host point into
 * the JSON). */
static int health_http(const struct ectx *e, json_t *o, const char *path, health_spec_t *sp)
{
    char fpath[PATH_MAX_LEN], q[QUOTE_MAX + 4];
    const char *str;
    size_t len;
    int rc;
    if ((rc = zone_json_get_str(e, o, path, "uri", &str, &len)) < 0)
        return rc;
    if (str && len) {
        if (strlen(str) != len)
            return zone_json_fail(e, TERN_EINVAL, "%s: contains a NUL",
                                  zone_json_join(fpath, sizeof(fpath), path, "uri"));
        sp->uri = str;
    }
    if ((rc = zone_json_get_str(e, o, path, "method", &str, &len)) < 0)
        return rc;
    if (str && len) {
        if (len == 4 && memcmp(str, "HEAD", 4) == 0)
            sp->method = HEALTH_HEAD;
        else if (len == 3 && memcmp(str, "GET", 3) == 0)
            sp->method = HEALTH_GET;
        else
            return zone_json_fail(e, TERN_EINVAL, "%s: \"%s\" is not HEAD or GET",
                                  zone_json_join(fpath, sizeof(fpath), path, "method"),
                                  zone_json_quote(str, len, q));
    }
    json_t *x = zone_json_field(o, "expect");
    if (x) {
        size_t n;
        zone_json_join(fpath, sizeof(fpath), path, "expect");
        if ((rc = zone_json_one_or_many(e, x, fpath, json_is_integer(x), "integer",
                                        HEALTH_MAX_EXPECT, &n)) < 0)
            return rc;
        for (size_t i = 0; i < n; i++) {
            char epath[PATH_MAX_LEN];
            json_t *c = zone_json_one_or_many_at(x, i, fpath, epath, sizeof(epath));
            if (!json_is_integer(c) || json_integer_value(c) < 100 || json_integer_value(c) > 599)
                return zone_json_fail(e, TERN_EINVAL, "%s: expected an HTTP status code (100..599)",
                                      epath);
            sp->expect[sp->nexpect++] = (uint16_t)json_integer_value(c);
        }
    }
    if ((rc = zone_json_get_bool(e, o, path, "tls_verify", &sp->tls_verify)) < 0)
        return rc;
    if ((rc = zone_json_get_str(e, o, path, "host", &str, &len)) < 0)
        return rc;
    if (str && len) {
        if (strlen(str) != len)
            return zone_json_fail(e, TERN_EINVAL, "%s: contains a NUL",
                                  zone_json_join(fpath, sizeof(fpath), path, "host"));
        sp->host = str;
    }
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
    char path[PATH_MAX_LEN], why[128];
    json_t *o;
    bool enable = false;
    int rc = zone_json_get_obj(e, set, base, "health_check", &o);
    hc->on = false;
    if (rc < 0 || !o)
        return rc;
    zone_json_join(path, sizeof(path), base, "health_check");
    if ((rc = zone_json_get_bool(e, o, path, "enable", &enable)) < 0 || !enable)
        return rc;
    health_spec_t *sp = &hc->spec;
    health_spec_init(sp);
    if ((rc = health_protocol(e, o, path, sp)) < 0 || (rc = health_numbers(e, o, path, sp)) < 0 ||
        (rc = health_http(e, o, path, sp)) < 0)
        return rc;
    if (health_spec_check(sp, why, sizeof(why)) < 0)
        return zone_json_fail(e, TERN_EINVAL, "%s: %s", path, why);
    hc->on = true;
    return 0;
}

/* A watermark of "shed": a number >= 0 in milli-units (the load cell's unit, health.h). */
static int shed_mark(const struct ectx *e, json_t *o, const char *path, const char *key,
                     uint32_t *milli)
{
    char fpath[PATH_MAX_LEN];
    json_t *x = zone_json_field(o, key);
    zone_json_join(fpath, sizeof(fpath), path, key);
    if (!x)
        return zone_json_fail(e, TERN_EINVAL, "%s: missing (a number)", fpath);
    if (!json_is_number(x))
        return zone_json_fail(e, TERN_EINVAL, "%s: expected a number, got %s", fpath,
                              zone_json_type_name(x));
    double v = json_number_value(x) * 1000.0;
    if (!isfinite(v) || v < 0 || v >= (double)(HEALTH_LOAD_UNKNOWN - 1))
        return zone_json_fail(e, TERN_EINVAL, "%s: %g is out of range (0..4294967)", fpath,
                              json_number_value(x));
    *milli = (uint32_t)round(v);
    return 0;
}

/* Load shedding (issue 33): "shed": {"low": L, "high": H, and one source: "header": NAME (a
 * response header of the RRset's health check), "json": "a.b" (a number in its JSON body,
 * read with GET) or "redis": HASH (HGET HASH <the record's address>, written by the operator's
 * systems, read by the checker every health.load_poll_ms)}. The source goes into the health
 * spec (the endpoint reads it), the watermarks into the policy. No block: pol->shed stays 0. */
static int parse_shed(const struct ectx *e, json_t *set, const char *base, struct phc *hc,
                      zone_geo_policy_t *pol)
{
    static const char *const srcs[] = {[HEALTH_LOAD_HEADER] = "header",
                                       [HEALTH_LOAD_JSON] = "json",
                                       [HEALTH_LOAD_REDIS] = "redis"};
    char path[PATH_MAX_LEN], fpath[PATH_MAX_LEN];
    json_t *o;
    int rc = zone_json_get_obj(e, set, base, "shed", &o);
    if (rc < 0 || !o)
        return rc;
    zone_json_join(path, sizeof(path), base, "shed");
    if ((rc = shed_mark(e, o, path, "low", &pol->shed_low)) < 0 ||
        (rc = shed_mark(e, o, path, "high", &pol->shed_high)) < 0)
        return rc;
    if (pol->shed_low >= pol->shed_high)
        return zone_json_fail(e, TERN_EINVAL, "%s: low (%g) must be below high (%g)", path,
                              pol->shed_low / 1000.0, pol->shed_high / 1000.0);
    const char *key, *str = NULL;
    size_t len = 0;
    unsigned src = 0;
    for (unsigned k = HEALTH_LOAD_HEADER; k <= HEALTH_LOAD_REDIS; k++) {
        const char *s;
        size_t n;
        if ((rc = zone_json_get_str(e, o, path, srcs[k], &s, &n)) < 0)
            return rc;
        if (!s)
            continue;
        if (src)
            return zone_json_fail(e, TERN_EINVAL, "%s: give one load source, not %s and %s", path,
                                  srcs[src], srcs[k]);
        src = k, str = s, len = n;
    }
    const char *unknown = NULL;
    json_t *v;
    json_object_foreach(o, key, v)
    {
        if (strcmp(key, "low") && strcmp(key, "high") && strcmp(key, "header") &&
            strcmp(key, "json") && strcmp(key, "redis"))
            unknown = key;
    }
    if (unknown)
        return zone_json_fail(e, TERN_EINVAL, "%s: unknown load source (header, json or redis)",
                              zone_json_join(fpath, sizeof(fpath), path, unknown));
    if (!src)
        return zone_json_fail(e, TERN_EINVAL, "%s: no load source (header, json or redis)", path);
    zone_json_join(fpath, sizeof(fpath), path, srcs[src]);
    if (len == 0 || len >= HEALTH_LOAD_KEY_MAX || strlen(str) != len ||
        (src == HEALTH_LOAD_JSON && (str[0] == '.' || str[len - 1] == '.' || strstr(str, ".."))))
        return zone_json_fail(e, TERN_EINVAL, "%s: expected a %s of 1..%d characters", fpath,
                              src == HEALTH_LOAD_JSON    ? "dotted path"
                              : src == HEALTH_LOAD_REDIS ? "hash key"
                                                         : "header name",
                              HEALTH_LOAD_KEY_MAX - 1);
    /* the load cell is the record's health endpoint's (health.h): a Redis load too needs one */
    if (!hc->on)
        return zone_json_fail(e, TERN_EINVAL,
                              "%s: a load source needs an enabled health_check block (http or "
                              "https for header and json, any protocol for redis)",
                              fpath);
    if (src != HEALTH_LOAD_REDIS && hc->spec.proto != HEALTH_HTTP && hc->spec.proto != HEALTH_HTTPS)
        return zone_json_fail(e, TERN_EINVAL, "%s: the load is read from an http or https check",
                              fpath);
    if (src == HEALTH_LOAD_JSON && hc->spec.method != HEALTH_GET) {
        json_t *h = zone_json_field(set, "health_check");
        if (zone_json_field(h, "method"))
            return zone_json_fail(
                e, TERN_EINVAL, "%s: a load in the JSON body needs health_check.method GET", fpath);
        hc->spec.method = HEALTH_GET; /* the body is needed: GET unless told otherwise */
    }
    hc->spec.load_src = (uint8_t)src;
    hc->spec.load_key = str;
    pol->shed = 1;
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
    if ((rc = zone_json_get_ttl(e, set, key, &ttl)) < 0 ||
        (rc = zone_json_get_records(e, set, key, &recs)) < 0 ||
        (rc = parse_filter(e, set, key, &pol, &has_pol)) < 0 ||
        (rc = parse_health(e, set, key, &p->hc[type == WIRE_T_AAAA])) < 0 ||
        (rc = parse_shed(e, set, key, &p->hc[type == WIRE_T_AAAA], &pol)) < 0)
        return rc;
    has_pol = has_pol || pol.shed;
    size_t i, added = 0;
    json_t *rec;
    json_array_foreach(recs, i, rec)
    {
        zone_json_pathf(path, sizeof(path), "%s.records[%zu]", key, i);
        const char *s;
        size_t slen;
        uint8_t addr[16];
        if ((rc = zone_json_get_str(e, rec, path, "ip", &s, &slen)) < 0)
            return rc;
        if (!s || slen == 0)
            continue; /* redins skips a record without an address */
        if (strlen(s) != slen || inet_pton(af, s, addr) != 1) {
            char fpath[PATH_MAX_LEN];
            uint8_t other[16];
            bool v4 = strlen(s) == slen && inet_pton(AF_INET, s, other) == 1;
            return zone_json_fail(
                e, TERN_EINVAL, "%s: \"%s\" is not an IPv%d address%s",
                zone_json_join(fpath, sizeof(fpath), path, "ip"), zone_json_quote(s, slen, q),
                family, type == WIRE_T_AAAA && v4 ? " (an IPv4 address belongs under \"a\")" : "");
        }
        struct prr r = {0};
        uint64_t w = 0, prio = 0;
        if ((rc = parse_countries(e, p, rec, path, &r)) < 0 ||
            (rc = parse_asns(e, p, rec, path, &r)) < 0 ||
            (rc = parse_group(e, rec, path, &r)) < 0 ||
            (rc = zone_json_get_uint(e, rec, path, "weight", UINT32_MAX, &w, NULL)) < 0 ||
            (rc = zone_json_get_uint(e, rec, path, "priority", UINT16_MAX, &prio, NULL)) < 0)
            return rc;
        r.meta.weight = (uint32_t)w;
        r.meta.priority = (uint16_t)prio;
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
            return zone_json_nomem(e);
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
    if ((rc = zone_json_get_ttl(e, set, key, &ttl)) < 0 ||
        (rc = zone_json_get_name(e, set, key, field_name, name, &nlen)) < 0)
        return rc;
    if (!nlen)
        return zone_json_fail(e, TERN_EINVAL, "%s.%s: missing", key, field_name);
    size_t rdoff = p->rdlen;
    if (rd_put(p, name, nlen) < 0)
        return zone_json_nomem(e);
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
    if ((rc = zone_json_get_ttl(e, set, key, &ttl)) < 0 ||
        (rc = zone_json_get_records(e, set, key, &recs)) < 0)
        return rc;
    json_array_foreach(recs, i, rec)
    {
        zone_json_pathf(path, sizeof(path), "%s.records[%zu]", key, i);
        const char *s;
        size_t len;
        if ((rc = zone_json_get_str(e, rec, path, "text", &s, &len)) < 0)
            return rc;
        if (!s || len == 0)
            continue; /* redins skips an empty text */
        /* redins' split255: consecutive <character-string>s of 255 bytes, the last one shorter
         * (redins adds an empty string after a text whose length is a multiple of 255; we do
         * not copy that slip, the text is the same) */
        size_t rdoff = p->rdlen;
        for (size_t off = 0; off < len; off += CHARSTR_MAX) {
            size_t n = len - off < CHARSTR_MAX ? len - off : CHARSTR_MAX;
            if (rd_u8(p, (uint8_t)n) < 0 || rd_put(p, s + off, n) < 0)
                return zone_json_nomem(e);
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
    if ((rc = zone_json_get_ttl(e, set, key, &ttl)) < 0 ||
        (rc = zone_json_get_records(e, set, key, &recs)) < 0)
        return rc;
    json_array_foreach(recs, i, rec)
    {
        zone_json_pathf(path, sizeof(path), "%s.records[%zu]", key, i);
        uint8_t name[DNAME_MAXLEN];
        size_t nlen;
        uint32_t pref = 0, prio = 0, weight = 0, port = 0;
        if (type == WIRE_T_MX) {
            if ((rc = zone_json_get_u32(e, rec, path, "preference", UINT16_MAX, &pref)) < 0)
                return rc;
        } else if (type == WIRE_T_SRV) {
            if ((rc = zone_json_get_u32(e, rec, path, "priority", UINT16_MAX, &prio)) < 0 ||
                (rc = zone_json_get_u32(e, rec, path, "weight", UINT16_MAX, &weight)) < 0 ||
                (rc = zone_json_get_u32(e, rec, path, "port", UINT16_MAX, &port)) < 0)
                return rc;
        }
        if ((rc = zone_json_get_name(e, rec, path, type == WIRE_T_SRV ? "target" : "host", name,
                                     &nlen)) < 0)
            return rc;
        if (!nlen)
            continue;
        size_t rdoff = p->rdlen;
        if (type == WIRE_T_MX && rd_u16(p, (uint16_t)pref) < 0)
            return zone_json_nomem(e);
        if (type == WIRE_T_SRV &&
            (rd_u16(p, (uint16_t)prio) < 0 || rd_u16(p, (uint16_t)weight) < 0 ||
             rd_u16(p, (uint16_t)port) < 0))
            return zone_json_nomem(e);
        if (rd_put(p, name, nlen) < 0)
            return zone_json_nomem(e);
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
    if ((rc = zone_json_get_ttl(e, set, key, &ttl)) < 0 ||
        (rc = zone_json_get_records(e, set, key, &recs)) < 0)
        return rc;
    json_array_foreach(recs, i, rec)
    {
        zone_json_pathf(path, sizeof(path), "%s.records[%zu]", key, i);
        uint32_t flag = 0;
        const char *tag, *value;
        size_t tlen, vlen;
        if ((rc = zone_json_get_u32(e, rec, path, "flag", UINT8_MAX, &flag)) < 0 ||
            (rc = zone_json_get_str(e, rec, path, "tag", &tag, &tlen)) < 0 ||
            (rc = zone_json_get_str(e, rec, path, "value", &value, &vlen)) < 0)
            return rc;
        /* RFC 8659 §4.1: the tag is 1 to 255 ASCII letters and digits */
        bool ok = tag && tlen >= 1 && tlen <= 255;
        for (size_t k = 0; ok && k < tlen; k++)
            ok = isalnum((unsigned char)tag[k]) && (unsigned char)tag[k] < 0x80;
        if (!ok)
            return zone_json_fail(e, TERN_EINVAL,
                                  "%s: \"%s\" is not a CAA tag (1 to 255 letters and digits)",
                                  zone_json_join(fpath, sizeof(fpath), path, "tag"),
                                  tag ? zone_json_quote(tag, tlen, q) : "");
        size_t rdoff = p->rdlen;
        if (rd_u8(p, (uint8_t)flag) < 0 || rd_u8(p, (uint8_t)tlen) < 0 ||
            rd_put(p, tag, tlen) < 0 || rd_put(p, value ? value : "", vlen) < 0)
            return zone_json_nomem(e);
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
    if ((rc = zone_json_get_ttl(e, set, key, &ttl)) < 0 ||
        (rc = zone_json_get_records(e, set, key, &recs)) < 0)
        return rc;
    json_array_foreach(recs, i, rec)
    {
        zone_json_pathf(path, sizeof(path), "%s.records[%zu]", key, i);
        uint32_t usage = 0, selector = 0, mtype = 0;
        const char *hex;
        size_t hlen;
        if ((rc = zone_json_get_u32(e, rec, path, "usage", UINT8_MAX, &usage)) < 0 ||
            (rc = zone_json_get_u32(e, rec, path, "selector", UINT8_MAX, &selector)) < 0 ||
            (rc = zone_json_get_u32(e, rec, path, "matching_type", UINT8_MAX, &mtype)) < 0 ||
            (rc = zone_json_get_str(e, rec, path, "certificate", &hex, &hlen)) < 0)
            return rc;
        zone_json_join(fpath, sizeof(fpath), path, "certificate");
        if (!hex || hlen == 0)
            return zone_json_fail(e, TERN_EINVAL, "%s: missing", fpath);
        if (hlen % 2)
            return zone_json_fail(e, TERN_EINVAL, "%s: odd number of hex digits", fpath);
        size_t rdoff = p->rdlen;
        if (rd_u8(p, (uint8_t)usage) < 0 || rd_u8(p, (uint8_t)selector) < 0 ||
            rd_u8(p, (uint8_t)mtype) < 0)
            return zone_json_nomem(e);
        for (size_t k = 0; k < hlen; k += 2) {
            int hi = hexval((unsigned char)hex[k]), lo = hexval((unsigned char)hex[k + 1]);
            if (hi < 0 || lo < 0)
                return zone_json_fail(e, TERN_EINVAL, "%s: \"%s\" is not hexadecimal", fpath,
                                      zone_json_quote(hex, hlen, q));
            if (rd_u8(p, (uint8_t)(hi << 4 | lo)) < 0)
                return zone_json_nomem(e);
        }
        if ((rc = finish_rr(e, p, type, ttl, rdoff, path)) < 0)
            return rc;
    }
    return 0;
}

typedef int (*parse_fn)(const struct ectx *e, struct pend *p, json_t *set, const char *key,
                        uint16_t type);

/* The RRset keys of a label, in the order they are decoded (that order shows only in which
 * error of a label with several is reported). */
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

int zone_json_rrset_parse(const struct ectx *e, struct pend *p, json_t *obj, bool *cname)
{
    int rc;
    *cname = false;
    for (size_t k = 0; k < sizeof(rrset_keys) / sizeof(rrset_keys[0]); k++) {
        json_t *set;
        if ((rc = zone_json_get_obj(e, obj, "", rrset_keys[k].key, &set)) < 0)
            return rc;
        if (!set)
            continue;
        size_t before = p->n;
        if ((rc = rrset_keys[k].parse(e, p, set, rrset_keys[k].key, rrset_keys[k].type)) < 0)
            return rc;
        if (rrset_keys[k].type == WIRE_T_CNAME && p->n > before)
            *cname = true;
    }
    return 0;
}

/* The RDATA of each RRset the label rendered (with the length prefixes the zone stores) against
 * what the builder takes: the other per-RRset limit that would otherwise fail the whole zone.
 */
int zone_json_rrset_check_bytes(const struct ectx *e, const struct pend *p)
{
    for (size_t k = 0; k < sizeof(rrset_keys) / sizeof(rrset_keys[0]); k++) {
        uint64_t bytes = 0;
        for (size_t i = 0; i < p->n; i++)
            if (p->rr[i].type == rrset_keys[k].type)
                bytes += 2u + p->rr[i].rdlen;
        if (bytes > ZONE_BUILDER_MAX_RRSET_BYTES)
            return zone_json_fail(e, TERN_ELIMIT,
                                  "%s: %llu bytes of RDATA, more than an RRset can hold",
                                  rrset_keys[k].key, (unsigned long long)bytes);
    }
    return 0;
}
