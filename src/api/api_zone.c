/*
 * api_zone.c — a zone version's RRsets and export text for the API (api_zone.h), read through an
 * AXFR stream of the version (the one walk of a zone that already yields every RR, steered ones
 * whole) and ldns for the presentation form.
 */
#include <ldns/ldns.h>
#include <stdlib.h>
#include <string.h>

#include "tern/api/api_zone.h"
#include "tern/common/err.h"
#include "tern/wire/rr.h"
#include "tern/xfr/xfr_stream.h"

/* Every RR of z once (the AXFR's closing SOA left out), sorted by owner, type, then RDATA. */
typedef struct rrs {
    ldns_rr **v;
    size_t n, cap;
} rrs_t;

static void rrs_free(rrs_t *r)
{
    for (size_t i = 0; i < r->n; i++)
        ldns_rr_free(r->v[i]);
    free(r->v);
}

static int rr_cmp(const void *a, const void *b)
{
    const ldns_rr *x = *(ldns_rr *const *)a, *y = *(ldns_rr *const *)b;
    int c = ldns_dname_compare(ldns_rr_owner(x), ldns_rr_owner(y));
    if (c)
        return c;
    if (ldns_rr_get_type(x) != ldns_rr_get_type(y))
        return ldns_rr_get_type(x) < ldns_rr_get_type(y) ? -1 : 1;
    return ldns_rr_compare(x, y);
}

/* What tern makes from a signed zone's keys (DNSKEY, CDS, CDNSKEY) or signs with them: not
 * records of the zone, as PowerDNS keeps them out of rrsets for the zones it signs (its
 * cryptokeys endpoint has the keys). A presigned zone (signed elsewhere) keeps them: they are
 * records of its file. */
static bool made_by_signing(ldns_rr_type t)
{
    return t == LDNS_RR_TYPE_DNSKEY || t == LDNS_RR_TYPE_CDS || t == LDNS_RR_TYPE_CDNSKEY ||
           t == LDNS_RR_TYPE_RRSIG || t == LDNS_RR_TYPE_NSEC || t == LDNS_RR_TYPE_NSEC3 ||
           t == LDNS_RR_TYPE_NSEC3PARAM;
}

/* Take the answer section of one AXFR message (signed: z is signed by tern). */
static int rrs_take(rrs_t *r, const uint8_t *m, size_t len, bool signed_, bool *soa_seen)
{
    ldns_pkt *pkt = NULL;
    if (ldns_wire2pkt(&pkt, m, len) != LDNS_STATUS_OK)
        return TERN_EINVAL;
    ldns_rr_list *an = ldns_pkt_answer(pkt);
    int rc = 0;
    for (size_t i = 0; i < ldns_rr_list_rr_count(an) && rc == 0; i++) {
        ldns_rr *rr = ldns_rr_list_rr(an, i);
        if (signed_ && made_by_signing(ldns_rr_get_type(rr)))
            continue;
        if (ldns_rr_get_type(rr) == LDNS_RR_TYPE_SOA) {
            if (*soa_seen)
                continue; /* the closing SOA */
            *soa_seen = true;
        }
        if (r->n == r->cap) {
            size_t cap = r->cap ? 2 * r->cap : 256;
            ldns_rr **v = realloc(r->v, cap * sizeof(*v));
            if (!v) {
                rc = TERN_ENOMEM;
                break;
            }
            r->v = v;
            r->cap = cap;
        }
        ldns_rr *c = ldns_rr_clone(rr);
        if (!c)
            rc = TERN_ENOMEM;
        else
            r->v[r->n++] = c;
    }
    ldns_pkt_free(pkt);
    return rc;
}

static int rrs_read(const zone_t *z, rrs_t *r)
{
    memset(r, 0, sizeof(*r));
    /* an AXFR query for the apex: header (QDCOUNT 1), question */
    uint8_t q[12 + DNAME_MAXLEN + 4] = {0};
    q[5] = 1;
    memcpy(q + 12, z->apex, z->apex_len);
    size_t ql = 12 + z->apex_len;
    q[ql++] = 0, q[ql++] = WIRE_T_AXFR, q[ql++] = 0, q[ql++] = WIRE_CLASS_IN;
    xfr_stream_t *s = xfr_stream_axfr(z, q, ql);
    uint8_t *buf = malloc(XFR_MSG_MAX);
    int rc = s && buf ? 1 : TERN_ENOMEM;
    bool soa_seen = false;
    while (rc == 1) {
        size_t len = 0;
        rc = xfr_stream_next(s, buf, XFR_MSG_MAX, 0, &len);
        if (rc >= 0) {
            int t = rrs_take(r, buf, len, z->dnssec != NULL, &soa_seen);
            if (t < 0)
                rc = t;
        }
    }
    free(buf);
    xfr_stream_free(s);
    if (rc < 0) {
        rrs_free(r);
        return rc;
    }
    qsort(r->v, r->n, sizeof(*r->v), rr_cmp);
    return 0;
}

/* The RDATA of rr in presentation form (its fields joined by spaces); NULL: out of memory. */
static char *rdata_text(const ldns_rr *rr)
{
    ldns_buffer *b = ldns_buffer_new(256);
    if (!b)
        return NULL;
    for (size_t i = 0; i < ldns_rr_rd_count(rr); i++) {
        if (i)
            ldns_buffer_printf(b, " ");
        (void)ldns_rdf2buffer_str(b, ldns_rr_rdf(rr, i));
    }
    char *s = ldns_buffer_export2str(b);
    ldns_buffer_free(b);
    return s;
}

/* One RRset's JSON from rrs v[0..n) (same owner and type). */
static json_t *rrset_json(ldns_rr *const *v, size_t n)
{
    json_t *recs = json_array();
    char *owner = ldns_rdf2str(ldns_rr_owner(v[0]));
    char *type = ldns_rr_type2str(ldns_rr_get_type(v[0]));
    uint32_t ttl = UINT32_MAX;
    json_t *o = NULL;
    bool ok = recs && owner && type;
    for (size_t i = 0; i < n && ok; i++) {
        char *c = rdata_text(v[i]);
        ok = c &&
             json_array_append_new(recs, json_pack("{s:s, s:b}", "content", c, "disabled", 0)) == 0;
        free(c);
        if (ldns_rr_ttl(v[i]) < ttl)
            ttl = ldns_rr_ttl(v[i]);
    }
    if (ok)
        o = json_pack("{s:s, s:s, s:I, s:O, s:[]}", "name", owner, "type", type, "ttl",
                      (json_int_t)ttl, "records", recs, "comments");
    json_decref(recs);
    free(owner);
    free(type);
    return o;
}

int api_zone_rrsets(const zone_t *z, const char *only_name, const char *only_type, json_t **out,
                    size_t *records)
{
    ldns_rdf *name = NULL;
    ldns_rr_type type = 0;
    *records = 0;
    *out = NULL;
    if (only_name && ldns_str2rdf_dname(&name, only_name) != LDNS_STATUS_OK)
        return TERN_EINVAL;
    if (only_type && !(type = ldns_get_rr_type_by_name(only_type))) {
        ldns_rdf_deep_free(name);
        return TERN_EINVAL;
    }
    rrs_t r;
    int rc = rrs_read(z, &r);
    bool have = rc == 0;
    json_t *a = rc == 0 ? json_array() : NULL;
    if (rc == 0 && !a)
        rc = TERN_ENOMEM;
    for (size_t i = 0, j; rc == 0 && i < r.n; i = j) {
        for (j = i + 1; j < r.n && ldns_rr_get_type(r.v[j]) == ldns_rr_get_type(r.v[i]) &&
                        ldns_dname_compare(ldns_rr_owner(r.v[j]), ldns_rr_owner(r.v[i])) == 0;
             j++)
            ;
        if ((name && ldns_dname_compare(name, ldns_rr_owner(r.v[i])) != 0) ||
            (type && ldns_rr_get_type(r.v[i]) != type))
            continue;
        *records += j - i;
        if (json_array_append_new(a, rrset_json(r.v + i, j - i)) < 0)
            rc = TERN_ENOMEM;
    }
    if (rc == 0)
        *out = a;
    else
        json_decref(a);
    if (have)
        rrs_free(&r);
    ldns_rdf_deep_free(name);
    return rc;
}

int api_zone_export(const zone_t *z, tern_buf_t *out)
{
    rrs_t r;
    int rc = rrs_read(z, &r);
    bool have = rc == 0;
    for (size_t i = 0; rc == 0 && i < r.n; i++) {
        char *owner = ldns_rdf2str(ldns_rr_owner(r.v[i]));
        char *type = ldns_rr_type2str(ldns_rr_get_type(r.v[i]));
        char *c = rdata_text(r.v[i]);
        if (owner && type && c)
            tern_buf_printf(out, "%s\t%u\tIN\t%s\t%s\n", owner, ldns_rr_ttl(r.v[i]), type, c);
        else
            rc = TERN_ENOMEM;
        free(owner);
        free(type);
        free(c);
    }
    if (have)
        rrs_free(&r);
    return rc == 0 && out->failed ? TERN_ENOMEM : rc;
}
