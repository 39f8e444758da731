/*
 * api_newzone.c — see api_newzone.h. The zone object's rrsets, with the SOA and NS pdns would
 * make, become one PATCH body of REPLACEs, which api_patch_build() parses and checks as it
 * does a PATCH's; the UPDATE it returns is read back RR by RR (class IN: the records) and each
 * (owner, type) written into its label's JSON with zone_json_label_set().
 */
#include "tern/api/api_newzone.h"

#include <jansson.h>
#include <ldns/ldns.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tern/api/api_patch.h"
#include "tern/common/buf.h"
#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/wire/rr.h"
#include "tern/zone/zone_json.h"

/* pdns' default-soa-content (pdns/auth-main.cc), "@" the zone, serial filled in */
#define DEFAULT_SOA_FMT                                                                            \
    "a.misconfigured.dns.server.invalid. hostmaster.%s %u 10800 3600 604800 3600"

static int fail(char *err, size_t errlen, const char *fmt, ...) TERN_PRINTF(3, 4);
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return TERN_EINVAL;
}

void api_newzone_free(api_newzone_t *z)
{
    for (size_t i = 0; i < z->n; i++) {
        free(z->labels[i]);
        free(z->texts[i]);
    }
    free(z->labels);
    free(z->texts);
    free(z->config);
    memset(z, 0, sizeof(*z));
}

/* An rrset object as a PATCH's REPLACE. */
static json_t *synth_rrset(const char *name, const char *type, json_t *records)
{
    return json_pack("{s:s, s:s, s:i, s:s, s:o}", "name", name, "type", type, "ttl",
                     (int)API_NEWZONE_TTL, "changetype", "REPLACE", "records", records);
}

/* The zone object's "kind", "zone", "dnssec": what tern cannot create is refused by name. */
static int check_settings(const json_t *doc, char *err, size_t errlen)
{
    const char *kind = json_string_value(json_object_get(doc, "kind"));
    if (!kind)
        return fail(err, errlen, "Key 'kind' not present or not a String");
    if (strcasecmp(kind, "Native") != 0 && strcasecmp(kind, "Master") != 0 &&
        strcasecmp(kind, "Primary") != 0)
        return fail(err, errlen,
                    "kind %s: tern creates Native and Master zones through the API; a secondary "
                    "zone is configured in ternd.yaml",
                    kind);
    const char *text = json_string_value(json_object_get(doc, "zone"));
    if (text && text[0])
        return fail(err, errlen, "zone data as text is not supported: give rrsets");
    if (json_is_true(json_object_get(doc, "dnssec")))
        return fail(err, errlen,
                    "dnssec: tern signs the zones its configuration gives keys for (dnssec: in "
                    "ternd.yaml), not zones created through the API");
    const json_t *ns = json_object_get(doc, "nameservers");
    if (ns && !json_is_null(ns) && !json_is_array(ns))
        return fail(err, errlen, "Nameservers is not a list");
    return 0;
}

/* The PATCH body: every rrset as a REPLACE, then the SOA and NS pdns makes. */
static int patch_body(const json_t *doc, const char *apex, uint32_t serial, json_t **out, char *err,
                      size_t errlen)
{
    json_t *sets = json_array(), *given = json_object_get(doc, "rrsets");
    bool have_soa = false, have_ns = false;
    size_t i;
    json_t *r;
    json_array_foreach(given, i, r)
    {
        if (!json_is_object(r))
            continue; /* api_patch_build() names it */
        json_t *c = json_copy(r);
        json_object_set_new(c, "changetype", json_string("REPLACE"));
        const char *name = json_string_value(json_object_get(r, "name"));
        const char *type = json_string_value(json_object_get(r, "type"));
        if (name && type && strcasecmp(name, apex) == 0) {
            have_soa |= strcasecmp(type, "SOA") == 0;
            have_ns |= strcasecmp(type, "NS") == 0;
        }
        json_array_append_new(sets, c);
    }
    const json_t *js = json_object_get(doc, "serial");
    if (json_is_integer(js) && json_integer_value(js) > 0 && json_integer_value(js) <= UINT32_MAX)
        serial = (uint32_t)json_integer_value(js);
    if (!have_soa) {
        char soa[DNAME_KEY_MAX + 128];
        snprintf(soa, sizeof(soa), DEFAULT_SOA_FMT, apex, serial);
        json_array_append_new(sets, synth_rrset(apex, "SOA", json_pack("[{s:s}]", "content", soa)));
    }
    const json_t *ns = json_object_get(doc, "nameservers");
    json_t *recs = json_array();
    json_array_foreach(ns, i, r)
    {
        const char *s = json_string_value(r);
        if (!s || !s[0]) {
            json_decref(recs);
            json_decref(sets);
            return fail(err, errlen, "Nameservers must be non-empty strings");
        }
        if (s[strlen(s) - 1] != '.') {
            json_decref(recs);
            json_decref(sets);
            return fail(err, errlen, "Nameserver is not canonical: '%s'", s);
        }
        json_array_append_new(recs, json_pack("{s:s}", "content", s));
    }
    if (json_array_size(recs) && have_ns) {
        json_decref(recs);
        json_decref(sets);
        return fail(err, errlen, "Nameservers list MUST NOT be mixed with zone-level NS in rrsets");
    }
    if (json_array_size(recs))
        json_array_append_new(sets, synth_rrset(apex, "NS", recs));
    else
        json_decref(recs);
    *out = json_pack("{s:o}", "rrsets", sets);
    return *out ? 0 : TERN_ENOMEM;
}

/* One RR of the UPDATE api_patch_build() made. */
typedef struct urr {
    const uint8_t *owner, *rd;
    size_t owner_len;
    uint16_t type, cls, rdlen;
    uint32_t ttl;
} urr_t;

/* The RR at *off of msg (len bytes), *off moved past it; false: malformed (cannot be: ours). */
static bool next_rr(const uint8_t *msg, size_t len, size_t *off, urr_t *r)
{
    int n = dname_check(msg + *off, len - *off);
    if (n < 0 || *off + (size_t)n + 10 > len)
        return false;
    r->owner = msg + *off;
    r->owner_len = (size_t)n;
    const uint8_t *p = msg + *off + n;
    r->type = tern_rd16(p);
    r->cls = tern_rd16(p + 2);
    r->ttl = tern_rd32(p + 4);
    r->rdlen = tern_rd16(p + 8);
    r->rd = p + 10;
    *off += (size_t)n + 10 + r->rdlen;
    return *off <= len;
}

/* The label of owner (text with its final dot) in zone apex (text with its final dot). */
static char *label_of(const char *owner, const char *apex)
{
    size_t lo = strlen(owner), la = strlen(apex);
    if (lo == la)
        return strdup("@");
    return lo > la + 1 ? strndup(owner, lo - la - 1) : NULL;
}

/* The label index of owner in z, added when new; <0 on no memory. */
static int label_index(api_newzone_t *z, const char *lab)
{
    for (size_t i = 0; i < z->n; i++)
        if (strcmp(z->labels[i], lab) == 0)
            return (int)i;
    char **l = realloc(z->labels, (z->n + 1) * sizeof(*l));
    if (!l)
        return TERN_ENOMEM;
    z->labels = l;
    char **t = realloc(z->texts, (z->n + 1) * sizeof(*t));
    if (!t)
        return TERN_ENOMEM;
    z->texts = t;
    if (!(z->labels[z->n] = strdup(lab)))
        return TERN_ENOMEM;
    z->texts[z->n] = NULL;
    return (int)z->n++;
}

/* The RRs of one (owner, type) group, rrs[0..n), into z: the config's SOA or a label's RRset. */
static int put_group(api_newzone_t *z, const char *apex, const urr_t *rrs, size_t n, char *err,
                     size_t errlen)
{
    char owner[DNAME_KEY_MAX + 2], tname[16], why[256];
    if (dname_to_str(rrs[0].owner, owner, sizeof(owner)) < 0)
        return fail(err, errlen, "bad owner");
    char *ts = ldns_rr_type2str((ldns_rr_type)rrs[0].type);
    snprintf(tname, sizeof(tname), "%s", ts ? ts : "?");
    free(ts);
    bool at_apex = strcasecmp(owner, apex) == 0;
    if (rrs[0].type == WIRE_T_SOA) {
        if (!at_apex || n != 1)
            return fail(err, errlen, "RRset %s IN SOA: %s", owner,
                        at_apex ? "a zone has one SOA record" : "an SOA only at the apex");
        z->serial = tern_rd32(rrs[0].rd + rrs[0].rdlen - 20);
        int rc = zone_json_config_set_soa("{}", 2, rrs[0].ttl, rrs[0].rd, rrs[0].rdlen, &z->config,
                                          why, sizeof(why));
        return rc == TERN_ENOMEM || rc == 0 ? rc
                                            : fail(err, errlen, "RRset %s IN SOA: %s", owner, why);
    }
    char *lab = label_of(owner, apex);
    int li = lab ? label_index(z, lab) : TERN_ENOMEM;
    free(lab);
    if (li < 0)
        return li;
    const uint8_t **rd = calloc(n, sizeof(*rd));
    uint16_t *len = calloc(n, sizeof(*len));
    int rc = rd && len ? 0 : TERN_ENOMEM;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rd[i] = rrs[i].rd;
        len[i] = rrs[i].rdlen;
    }
    char *cur = z->texts[li], *next = NULL;
    if (rc == 0)
        rc = zone_json_label_set(cur, cur ? strlen(cur) : 0, rrs[0].type, rrs[0].ttl, rd, len, n,
                                 &next, why, sizeof(why));
    free(rd);
    free(len);
    if (rc == 0) {
        free(cur);
        z->texts[li] = next;
    } else if (rc != TERN_ENOMEM) {
        rc = fail(err, errlen, "RRset %s IN %s: %s", owner, tname, why);
    }
    return rc;
}

/* The UPDATE's added RRs (class IN), grouped by (owner, type) in order, into z. */
static int read_update(api_newzone_t *z, const char *apex, const tern_buf_t *msg, size_t nrr,
                       char *err, size_t errlen)
{
    const uint8_t *m = (const uint8_t *)msg->p;
    size_t off = 12;
    int n = dname_check(m + off, msg->len - off);
    if (n < 0)
        return fail(err, errlen, "bad update");
    off += (size_t)n + 4;
    urr_t *rrs = calloc(nrr ? nrr : 1, sizeof(*rrs));
    if (!rrs)
        return TERN_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < nrr; i++) {
        urr_t r;
        if (!next_rr(m, msg->len, &off, &r)) {
            free(rrs);
            return fail(err, errlen, "bad update");
        }
        if (r.cls == WIRE_CLASS_IN)
            rrs[k++] = r;
    }
    /* each group whole: api_patch_build() refused duplicates, so one rrset's RRs are adjacent */
    int rc = 0;
    for (size_t s = 0, e; rc == 0 && s < k; s = e) {
        for (e = s + 1;
             e < k && rrs[e].type == rrs[s].type && rrs[e].owner_len == rrs[s].owner_len &&
             memcmp(rrs[e].owner, rrs[s].owner, rrs[s].owner_len) == 0;
             e++)
            ;
        rc = put_group(z, apex, &rrs[s], e - s, err, errlen);
    }
    free(rrs);
    return rc;
}

int api_newzone_build(const char *body, size_t len, uint32_t serial, api_newzone_t *z, char *err,
                      size_t errlen)
{
    memset(z, 0, sizeof(*z));
    json_error_t je;
    json_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je), *patch = NULL;
    if (!doc)
        return fail(err, errlen, "JSON parse error: %s (line %d)", je.text, je.line);
    const char *name = json_string_value(json_object_get(doc, "name"));
    const char *why = NULL;
    int rc = 0;
    tern_buf_t msg;
    tern_buf_init(&msg, 0);
    if (!json_is_object(doc) || !name) {
        rc = fail(err, errlen, "Key 'name' not present or not a String");
        goto out;
    }
    if (dname_key(name, z->origin, sizeof(z->origin), &why) < 0 || strcmp(z->origin, ".") == 0) {
        rc = fail(err, errlen, "Unable to parse DNS Name '%s'%s%s", name, why ? ": " : "",
                  why ? why : ": tern does not create the root zone");
        goto out;
    }
    char apex[DNAME_KEY_MAX + 2];
    snprintf(apex, sizeof(apex), "%s.", z->origin);
    const json_t *sets = json_object_get(doc, "rrsets");
    if ((rc = check_settings(doc, err, errlen)) < 0 ||
        (sets && !json_is_null(sets) && !json_is_array(sets) &&
         (rc = fail(err, errlen, "rrsets is not a list")) < 0) ||
        (rc = patch_body(doc, apex, serial, &patch, err, errlen)) < 0)
        goto out;
    char *text = json_dumps(patch, JSON_COMPACT);
    size_t nrr = 0;
    rc = text ? api_patch_build(z->origin, text, strlen(text), &msg, &nrr, err, errlen)
              : TERN_ENOMEM;
    free(text);
    if (rc == TERN_EINVAL) {
        char inner[1024];
        snprintf(inner, sizeof(inner), "%s", err);
        rc = fail(err, errlen, "New RRsets are invalid: %s", inner);
    }
    if (rc == 0)
        rc = read_update(z, apex, &msg, nrr, err, errlen);
out:
    if (rc == TERN_ENOMEM)
        snprintf(err, errlen, "out of memory");
    tern_buf_free(&msg);
    json_decref(patch);
    json_decref(doc);
    return rc;
}
