/*
 * zone_json_edit.c — redins JSON written back (zone_json.h, "Editing"): one RRset of a label, or
 * the zone config's SOA, changed in the JSON text Redis holds, everything else kept as it is.
 * The inverse of zone_json_rrset.c's readers, field for field, so what is written reads back
 * as the RRs given.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/common/hash.h"
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"
#include "tern/zone/zone_json.h"

/* The label key of each type redins' schema holds, and how its RRs are written. */
typedef enum { K_RECORDS, K_SINGLE } kind_t;
static const struct {
    uint16_t type;
    const char *key;
    kind_t kind;
    const char *field; /* K_SINGLE: the object's name field */
} types[] = {
    {WIRE_T_A, "a", K_RECORDS, NULL},
    {WIRE_T_AAAA, "aaaa", K_RECORDS, NULL},
    {WIRE_T_CNAME, "cname", K_SINGLE, "host"},
    {WIRE_T_TXT, "txt", K_RECORDS, NULL},
    {WIRE_T_NS, "ns", K_RECORDS, NULL},
    {WIRE_T_MX, "mx", K_RECORDS, NULL},
    {WIRE_T_SRV, "srv", K_RECORDS, NULL},
    {WIRE_T_CAA, "caa", K_RECORDS, NULL},
    {WIRE_T_PTR, "ptr", K_SINGLE, "domain"},
    {WIRE_T_TLSA, "tlsa", K_RECORDS, NULL},
    {WIRE_T_ANAME, "aname", K_SINGLE, "location"},
};

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...) TERN_PRINTF(4, 5);

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return rc;
}

/* A name in RDATA (uncompressed) as redins writes it: presentation form with the final dot. */
static json_t *name_json(const uint8_t *rd, size_t len, size_t *used)
{
    char s[DNAME_KEY_MAX + 2];
    int n = dname_check(rd, len);
    if (n < 0 || dname_to_str(rd, s, sizeof(s)) < 0)
        return NULL;
    *used = (size_t)n;
    size_t l = strlen(s);
    if (l == 0 || s[l - 1] != '.') {
        s[l] = '.';
        s[l + 1] = '\0';
    }
    return json_string(s);
}

/* One record of type as redins' schema has it; NULL with err when the RDATA cannot be. */
static json_t *record_json(uint16_t type, const uint8_t *rd, uint16_t len, char *err, size_t errlen)
{
    char ip[INET6_ADDRSTRLEN];
    size_t used = 0;
    json_t *o = json_object(), *name = NULL;
    if (!o)
        return NULL;
    switch (type) {
    case WIRE_T_A:
    case WIRE_T_AAAA:
        if (len != (type == WIRE_T_A ? 4 : 16) ||
            !inet_ntop(type == WIRE_T_A ? AF_INET : AF_INET6, rd, ip, sizeof(ip)))
            goto bad;
        json_object_set_new(o, "ip", json_string(ip));
        return o;
    case WIRE_T_TXT: { /* one text per record: its strings joined (redins splits at 255) */
        char *t = malloc((size_t)len + 1);
        size_t tl = 0;
        for (size_t p = 0; t && p < len;) {
            size_t sl = rd[p];
            if (p + 1 + sl > len) {
                free(t);
                goto bad;
            }
            if (sl != 255 && p + 1 + sl != len) { /* a short string before the last */
                free(t);
                json_decref(o);
                return fail(err, errlen, 0,
                            "TXT: redins' schema keeps one text a record, split at 255 bytes; "
                            "this record's strings are split elsewhere"),
                       NULL;
            }
            memcpy(t + tl, rd + p + 1, sl);
            tl += sl;
            p += 1 + sl;
        }
        if (!t)
            break;
        json_object_set_new(o, "text", json_stringn(t, tl));
        free(t);
        return o;
    }
    case WIRE_T_NS:
        if (!(name = name_json(rd, len, &used)) || used != len)
            goto bad;
        json_object_set_new(o, "host", name);
        return o;
    case WIRE_T_MX:
        if (len < 3 || !(name = name_json(rd + 2, len - 2u, &used)) || used != len - 2u)
            goto bad;
        json_object_set_new(o, "host", name);
        json_object_set_new(o, "preference", json_integer(tern_rd16(rd)));
        return o;
    case WIRE_T_SRV:
        if (len < 7 || !(name = name_json(rd + 6, len - 6u, &used)) || used != len - 6u)
            goto bad;
        json_object_set_new(o, "target", name);
        json_object_set_new(o, "priority", json_integer(tern_rd16(rd)));
        json_object_set_new(o, "weight", json_integer(tern_rd16(rd + 2)));
        json_object_set_new(o, "port", json_integer(tern_rd16(rd + 4)));
        return o;
    case WIRE_T_CAA:
        if (len < 2 || rd[1] == 0 || 2u + rd[1] > len)
            goto bad;
        json_object_set_new(o, "flag", json_integer(rd[0]));
        json_object_set_new(o, "tag", json_stringn((const char *)rd + 2, rd[1]));
        json_object_set_new(o, "value",
                            json_stringn((const char *)rd + 2 + rd[1], len - 2u - rd[1]));
        return o;
    case WIRE_T_TLSA: {
        char *hex = len >= 4 ? malloc(2u * len) : NULL;
        if (!hex)
            goto bad;
        for (size_t i = 3; i < len; i++)
            snprintf(hex + 2 * (i - 3), 3, "%02x", rd[i]);
        json_object_set_new(o, "usage", json_integer(rd[0]));
        json_object_set_new(o, "selector", json_integer(rd[1]));
        json_object_set_new(o, "matching_type", json_integer(rd[2]));
        json_object_set_new(o, "certificate", json_string(hex));
        free(hex);
        return o;
    }
    default:
        break;
    }
bad:
    json_decref(o);
    return fail(err, errlen, 0, "RDATA of %u bytes that redins' schema cannot hold for its type",
                len),
           NULL;
}

/* redins reads keys as Go's encoding/json does, ignoring case ("MBox", "IP"): a key is found,
 * and replaced, whatever its case. */
static json_t *get_ci(json_t *o, const char *key)
{
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        if (strcasecmp(k, key) == 0)
            return v;
    }
    return NULL;
}

static void set_ci(json_t *o, const char *key, json_t *value)
{
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(o, tmp, k, v)
    {
        if (strcasecmp(k, key) == 0)
            json_object_del(o, k);
    }
    json_object_set_new(o, key, value);
}

/* The A/AAAA record of the old set with this ip, to keep its own fields (country, weight...). */
static json_t *old_record(json_t *old_set, const char *ip)
{
    json_t *recs = old_set ? get_ci(old_set, "records") : NULL, *r;
    size_t i;
    json_array_foreach(recs, i, r)
    {
        const char *s = json_string_value(get_ci(r, "ip"));
        if (s && strcmp(s, ip) == 0)
            return r;
    }
    return NULL;
}

/* The new value of the type's key: the old one with its TTL and records (A/AAAA keeping each
 * staying record's fields) or its name replaced; its other keys (filter, health_check) kept. */
static json_t *set_json(size_t t, json_t *old_set, uint32_t ttl, const uint8_t *const *rdata,
                        const uint16_t *rdlen, size_t n, char *err, size_t errlen)
{
    uint16_t type = types[t].type;
    json_t *set = json_is_object(old_set) ? json_deep_copy(old_set) : json_object();
    if (!set)
        return NULL;
    set_ci(set, "ttl", json_integer(ttl));
    if (types[t].kind == K_SINGLE) {
        size_t used;
        json_t *name = n == 1 ? name_json(rdata[0], rdlen[0], &used) : NULL;
        if (!name || used != rdlen[0]) {
            json_decref(name);
            json_decref(set);
            return fail(err, errlen, 0, "%s: redins' schema holds one name", types[t].key), NULL;
        }
        set_ci(set, types[t].field, name);
        return set;
    }
    json_t *recs = json_array();
    set_ci(set, "records", recs);
    for (size_t i = 0; i < n; i++) {
        json_t *r = record_json(type, rdata[i], rdlen[i], err, errlen);
        if (!r) {
            json_decref(set);
            return NULL;
        }
        const char *ip = json_string_value(json_object_get(r, "ip"));
        json_t *keep = ip ? old_record(old_set, ip) : NULL;
        if (keep) {
            json_decref(r);
            r = json_deep_copy(keep);
        }
        json_array_append_new(recs, r);
    }
    return set;
}

int zone_json_label_set(const char *json, size_t len, uint16_t type, uint32_t ttl,
                        const uint8_t *const *rdata, const uint16_t *rdlen, size_t n, char **out,
                        char *err, size_t errlen)
{
    *out = NULL;
    size_t t = 0;
    while (t < sizeof(types) / sizeof(types[0]) && types[t].type != type)
        t++;
    if (t == sizeof(types) / sizeof(types[0]))
        return fail(err, errlen, TERN_ENOTSUP, "type %u: redins' schema has no such RRset", type);
    json_error_t je;
    json_t *label = json && len ? json_loadb(json, len, 0, &je) : json_object();
    if (!label || !json_is_object(label)) {
        json_decref(label);
        return fail(err, errlen, TERN_ESYNTAX, "the label's JSON in Redis does not parse: %s",
                    json && len ? je.text : "not an object");
    }
    err[0] = '\0';
    if (n == 0) {
        json_object_del(label, types[t].key);
    } else {
        json_t *set =
            set_json(t, json_object_get(label, types[t].key), ttl, rdata, rdlen, n, err, errlen);
        if (!set) {
            json_decref(label);
            return err[0] ? TERN_ENOTSUP : TERN_ENOMEM;
        }
        json_object_set_new(label, types[t].key, set);
    }
    int rc = 0;
    if (json_object_size(label) && !(*out = json_dumps(label, JSON_COMPACT)))
        rc = fail(err, errlen, TERN_ENOMEM, "out of memory");
    json_decref(label);
    return rc;
}

int zone_json_config_set_soa(const char *json, size_t len, uint32_t ttl, const uint8_t *soa,
                             uint16_t soa_len, char **out, char *err, size_t errlen)
{
    *out = NULL;
    json_error_t je;
    json_t *cfg = json && len ? json_loadb(json, len, 0, &je) : NULL;
    if (!cfg || !json_is_object(cfg)) {
        json_decref(cfg);
        return fail(err, errlen, TERN_ESYNTAX, "the zone config in Redis does not parse%s%s",
                    cfg || !json ? "" : ": ", cfg || !json ? "" : je.text);
    }
    size_t a = 0, b = 0;
    json_t *ns = name_json(soa, soa_len, &a);
    json_t *mbox = ns ? name_json(soa + a, soa_len - a, &b) : NULL;
    if (!mbox || a + b + 20 != soa_len) {
        json_decref(ns);
        json_decref(mbox);
        json_decref(cfg);
        return fail(err, errlen, TERN_EINVAL, "a malformed SOA");
    }
    json_t *o = get_ci(cfg, "soa");
    if (!json_is_object(o)) {
        o = json_object();
        set_ci(cfg, "soa", o);
    }
    const uint8_t *v = soa + a + b;
    set_ci(o, "ns", ns);
    set_ci(o, "mbox", mbox);
    set_ci(o, "ttl", json_integer(ttl));
    static const char *const f[] = {"serial", "refresh", "retry", "expire", "minttl"};
    for (int i = 0; i < 5; i++)
        set_ci(o, f[i], json_integer(tern_rd32(v + 4 * i)));
    int rc = (*out = json_dumps(cfg, JSON_COMPACT))
                 ? 0
                 : fail(err, errlen, TERN_ENOMEM, "out of memory");
    json_decref(cfg);
    return rc;
}

uint64_t zone_json_config_digest_zone_wide(const char *json, size_t len)
{
    json_error_t je;
    json_t *cfg = json && len ? json_loadb(json, len, 0, &je) : NULL;
    uint64_t h = 0x77696465ull;
    if (!json_is_object(cfg)) {
        h = tern_hash64(json ? json : "", json ? len : 0, h);
    } else {
        set_ci(cfg, "soa", json_null());
        json_object_del(cfg, "soa");
        char *t = json_dumps(cfg, JSON_COMPACT | JSON_SORT_KEYS);
        h = t ? tern_hash64(t, strlen(t), h) : tern_hash64(json, len, h + 1);
        free(t);
    }
    json_decref(cfg);
    return tern_mix64(h);
}
