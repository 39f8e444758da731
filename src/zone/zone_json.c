/*
 * zone_json.c — redins' JSON zones (arvancloud/redins 1.x) into a zone_builder.
 *
 * Decoding follows what redins gets from Go's encoding/json, since the data in the wild was
 * written for it (zone_json_get.c keeps those rules). Names inside records are absolute with or
 * without their final dot (redins applies dns.Fqdn); labels (the keys of the zone) are relative
 * to the origin, "@" being the apex.
 *
 * This file holds the zone: its config block (the SOA, dnssec, domain_id), its labels one by one
 * and the whole-file form. A label's RRsets are rendered by zone_json_rrset.c. A label is
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
#include "zone_json_int.h"

/* redins' default TTL (its handler config "default_ttl" defaults to 300). */
#define DEFAULT_TTL 300u

/* The SOA timers redins puts in a zone config before decoding the stored one over it, so a
 * config that leaves one out gets these (redins handler.LoadZone). */
#define SOA_REFRESH 86400u
#define SOA_RETRY   7200u
#define SOA_EXPIRE  3600u
#define SOA_MINTTL  300u

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
    zone_json_rrset_free(&zj->p);
    free(zj->source);
    free(zj);
}

static int config_obj(zone_json_t *zj, json_t *cfg, char *err, size_t errlen)
{
    struct ectx e = {.zj = zj, .what = "config", .err = err, .errlen = errlen};
    json_t *soa;
    int rc;
    if (zj->have_config)
        return zone_json_fail(&e, TERN_EINVAL, "given twice");
    if (!json_is_object(cfg))
        return zone_json_fail(&e, TERN_EINVAL, "expected an object, got %s",
                              zone_json_type_name(cfg));
    if ((rc = zone_json_get_obj(&e, cfg, "", "soa", &soa)) < 0)
        return rc;
    if (!soa)
        return zone_json_fail(&e, TERN_EINVAL, "soa: missing");

    uint8_t ns[DNAME_MAXLEN], mbox[DNAME_MAXLEN];
    size_t nslen, mboxlen;
    uint32_t ttl, refresh = SOA_REFRESH, retry = SOA_RETRY, expire = SOA_EXPIRE,
                  minttl = SOA_MINTTL, serial = 0;
    bool have_serial = false;
    uint64_t s64 = 0;
    if ((rc = zone_json_get_name(&e, soa, "soa", "ns", ns, &nslen)) < 0 ||
        (rc = zone_json_get_name(&e, soa, "soa", "mbox", mbox, &mboxlen)) < 0 ||
        (rc = zone_json_get_ttl(&e, soa, "soa", &ttl)) < 0 ||
        (rc = zone_json_get_u32(&e, soa, "soa", "refresh", UINT32_MAX, &refresh)) < 0 ||
        (rc = zone_json_get_u32(&e, soa, "soa", "retry", UINT32_MAX, &retry)) < 0 ||
        (rc = zone_json_get_u32(&e, soa, "soa", "expire", UINT32_MAX, &expire)) < 0 ||
        (rc = zone_json_get_u32(&e, soa, "soa", "minttl", UINT32_MAX, &minttl)) < 0 ||
        (rc = zone_json_get_uint(&e, soa, "soa", "serial", UINT32_MAX, &s64, &have_serial)) < 0)
        return rc;
    if (!nslen)
        return zone_json_fail(&e, TERN_EINVAL, "soa.ns: missing");
    if (!mboxlen)
        return zone_json_fail(&e, TERN_EINVAL, "soa.mbox: missing");
    /* redins stamps its SOA with the load time; a config that gives no serial gets that too */
    serial = have_serial ? (uint32_t)s64 : (uint32_t)time(NULL);

    bool dnssec = false, flatten = false, unsign = false;
    const char *domain_id, *policy;
    size_t idlen, plen;
    if ((rc = zone_json_get_bool(&e, cfg, "", "dnssec", &dnssec)) < 0 ||
        (rc = zone_json_get_bool(&e, cfg, "", "cname_flattening", &flatten)) < 0 ||
        (rc = zone_json_get_str(&e, cfg, "", "domain_id", &domain_id, &idlen)) < 0 ||
        (rc = zone_json_get_str(&e, cfg, "", "dnssec_policy", &policy, &plen)) < 0 ||
        (rc = zone_json_get_bool(&e, cfg, "", "dnssec_unsign", &unsign)) < 0)
        return rc;
    /* tern's own field: keys tern makes and rolls by a ternd.yaml policy (Redis zones only; a
     * file zone names its policy in ternd.yaml) */
    if (policy && (plen == 0 || plen >= sizeof(zj->dnssec_policy) || memchr(policy, 0, plen)))
        return zone_json_fail(&e, TERN_EINVAL, "dnssec_policy: a name of 1..%zu bytes",
                              sizeof(zj->dnssec_policy) - 1);
    if (policy && !zj->opts.dnssec_deferred)
        return zone_json_fail(&e, TERN_EINVAL,
                              "\"dnssec_policy\" is read from Redis zones only (a file zone "
                              "names its policy in ternd.yaml: dnssec: {policy: NAME})");
    if (policy) {
        memcpy(zj->dnssec_policy, policy, plen);
        zj->dnssec_policy[plen] = 0;
        dnssec = true;
    }
    /* unsigning (RFC 8078) follows the policy's key state: without a policy there is none */
    if (unsign && !policy)
        return zone_json_fail(&e, TERN_EINVAL,
                              "\"dnssec_unsign\": true needs \"dnssec_policy\" (the policy whose "
                              "keys it removes)");
    zj->dnssec_unsign = unsign;
    /* kept for the request log's domain_uuid, as redins logs it */
    if (domain_id && (rc = zone_builder_set_domain_id(zj->b, domain_id, idlen)) < 0)
        return zone_json_fail(&e, rc, "domain_id: %s",
                              rc == TERN_EINVAL ? "longer than 255 bytes" : "out of memory");
    /* redins turns DNSSEC off silently when it cannot use the keys; a zone that says it is
     * signed and cannot be is an error here, so the old version keeps serving */
    zj->dnssec = dnssec;
    if (dnssec && !zj->opts.dnskeys && !zj->opts.dnssec_deferred)
        return zone_json_fail(
            &e, TERN_EINVAL,
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
        zone_json_fail(e, TERN_ESYNTAX, "JSON syntax error at line %d column %d: %s", je.line,
                       je.column, tern_escape(text, sizeof(text), je.text, strlen(je.text)));
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
        return zone_json_nomem(e);
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
            return zone_json_fail(e, rc, "%s", zone_builder_error(zj->b));
        if (apex && r->type == WIRE_T_NS)
            zj->apex_ns = true;
    }
    for (unsigned i = 0; i < p->npol; i++) {
        int rc = zone_builder_set_policy(zj->b, owner, p->pol[i].type, &p->pol[i].policy);
        if (rc < 0)
            return zone_json_fail(e, rc, "%s", zone_builder_error(zj->b));
    }
    return 0;
}

/* One label's object into the builder. one_owner: refuse a label whose owner an earlier label
 * already gave (the incremental API's rule, see zone_json_label()). */
static int label_obj(zone_json_t *zj, const char *label, json_t *obj, bool one_owner, char *err,
                     size_t errlen)
{
    char what[QUOTE_MAX + 16], q[QUOTE_MAX + 4];
    snprintf(what, sizeof(what), "label %s", zone_json_quote(label, strlen(label), q));
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
            return zone_json_fail(&e, TERN_EINVAL, "bad label: %s", why);
        if ((size_t)n + zj->origin_len > DNAME_MAXLEN)
            return zone_json_fail(&e, TERN_EINVAL, "bad label: name longer than 255 bytes");
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
        return zone_json_fail(
            &e, TERN_EEXIST,
            "%s is given by another label already (labels that differ only in case "
            "or escapes name one owner)",
            oname);
    }
    if (!json_is_object(obj))
        return zone_json_fail(&e, TERN_EINVAL, "expected an object, got %s",
                              zone_json_type_name(obj));

    zone_json_rrset_reset(p);
    bool cname = false;
    if ((rc = zone_json_rrset_parse(&e, p, obj, &cname)) < 0)
        return rc;
    /* RFC 1034 §3.6.2 (and RFC 2181 §10.1): caught here rather than by the builder's finish so
     * that it costs the label, not the zone */
    if (cname && (p->n > 1 || apex))
        return zone_json_fail(&e, TERN_EINVAL, "cname: a CNAME cannot be beside other data%s",
                              apex ? " (the apex has the SOA)" : "");
    if ((rc = zone_json_rrset_check_bytes(&e, p)) < 0)
        return rc;
    return commit(zj, &e, owner, apex);
}

int zone_json_label(zone_json_t *zj, const char *label, const char *json, size_t len, char *err,
                    size_t errlen)
{
    char what[QUOTE_MAX + 16], q[QUOTE_MAX + 4];
    snprintf(what, sizeof(what), "label %s", zone_json_quote(label, strlen(label), q));
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

const char *zone_json_dnssec_policy(const zone_json_t *zj)
{
    return zj->dnssec_policy[0] ? zj->dnssec_policy : NULL;
}

bool zone_json_dnssec_unsign(const zone_json_t *zj)
{
    return zj->dnssec_unsign;
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
                     path, zj->zname, zone_json_quote(k, strlen(k), q));
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
