/*
 * api_patch.c — a PowerDNS PATCH body into one RFC 2136 UPDATE message (api_patch.h).
 *
 * The error texts follow pdns/ws-auth.cc (patchZone(), validateChangeType(), applyReplace(),
 * gatherRecords(), parseRecordNameAndType()) and pdns/ws-api.cc (apiNameToDNSName()), so a
 * client that matches on them sees the same words.
 */
#include <stdarg.h>
#include <jansson.h>
#include <ldns/ldns.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tern/api/api_patch.h"
#include "tern/common/err.h"
#include "tern/wire/parse.h"
#include "tern/wire/rr.h"

/* A DNS message's largest size: the UPDATE must be one message (RFC 2136 §2, over TCP). */
#define PATCH_MSG_MAX 65535

enum change { CH_REPLACE, CH_DELETE, CH_EXTEND, CH_PRUNE };
static const char *const change_names[] = {"REPLACE", "DELETE", "EXTEND", "PRUNE"};

/* One rrset of the body, as read. */
typedef struct prrset {
    ldns_rdf *name;
    uint16_t type;
    enum change ch;
    char text[300]; /* "NAME IN TYPE", for errors */
} prrset_t;

typedef struct pctx {
    ldns_rdf *apex;
    tern_buf_t *msg;
    size_t nupdates;
    char *err;
    size_t errlen;
} pctx_t;

static int fail(pctx_t *p, const char *fmt, ...) TERN_PRINTF(2, 3);
static int fail(pctx_t *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, p->errlen, fmt, ap);
    va_end(ap);
    return TERN_EINVAL;
}

static void put16(tern_buf_t *b, uint16_t v)
{
    uint8_t x[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    tern_buf_append(b, x, 2);
}

static void put32(tern_buf_t *b, uint32_t v)
{
    put16(b, (uint16_t)(v >> 16));
    put16(b, (uint16_t)v);
}

/* One update RR: owner, type, class, ttl, then rdlen and rdata (NULL: none). */
static void put_rr(pctx_t *p, const ldns_rdf *owner, uint16_t type, uint16_t rclass, uint32_t ttl,
                   const uint8_t *rdata, size_t rdlen)
{
    tern_buf_append(p->msg, ldns_rdf_data(owner), ldns_rdf_size(owner));
    put16(p->msg, type);
    put16(p->msg, rclass);
    put32(p->msg, ttl);
    put16(p->msg, (uint16_t)rdlen);
    if (rdlen)
        tern_buf_append(p->msg, rdata, rdlen);
    p->nupdates++;
}

/* "name" and "type" of rrset r (pdns parseRecordNameAndType(), apiNameToDNSName()). */
static int get_name_type(pctx_t *p, const json_t *r, prrset_t *s)
{
    const char *name = json_string_value(json_object_get(r, "name"));
    const char *type = json_string_value(json_object_get(r, "type"));
    if (!name)
        return fail(p, "Key 'name' not present or not a String");
    if (!type)
        return fail(p, "Key 'type' not present or not a String");
    size_t nl = strlen(name);
    if (!nl || name[nl - 1] != '.')
        return fail(p, "DNS Name '%s' is not canonical", name);
    if (ldns_str2rdf_dname(&s->name, name) != LDNS_STATUS_OK)
        return fail(p, "Unable to parse DNS Name '%s'", name);
    ldns_dname2canonical(s->name);
    ldns_rr_type t = ldns_get_rr_type_by_name(type);
    snprintf(s->text, sizeof(s->text), "%s IN %s", name, type);
    /* meta types and ANY are no RRset's type */
    if (!t || t == LDNS_RR_TYPE_ANY || t == LDNS_RR_TYPE_AXFR || t == LDNS_RR_TYPE_IXFR ||
        t == LDNS_RR_TYPE_OPT || t == LDNS_RR_TYPE_TSIG)
        return fail(p, "RRset %s: unknown type given", s->text);
    s->type = (uint16_t)t;
    return 0;
}

static bool in_zone(const pctx_t *p, const ldns_rdf *name)
{
    return ldns_dname_compare(name, p->apex) == 0 || ldns_dname_is_subdomain(name, p->apex);
}

/* The records of r (pdns gatherRecords()), each added (class IN) or, for PRUNE, deleted (class
 * NONE). */
static int put_records(pctx_t *p, const json_t *r, const prrset_t *s, bool del)
{
    const json_t *recs = json_object_get(r, "records");
    const json_t *jt = json_object_get(r, "ttl");
    if (!del &&
        (!json_is_integer(jt) || json_integer_value(jt) < 0 || json_integer_value(jt) > 2147483647))
        return fail(p, "Key 'ttl' not present or not an Integer (0..2147483647)");
    uint32_t ttl = del ? 0 : (uint32_t)json_integer_value(jt);
    char owner[LDNS_MAX_DOMAINLEN + 2];
    char *os = ldns_rdf2str(s->name);
    snprintf(owner, sizeof(owner), "%s", os ? os : ".");
    free(os);
    char tname[32];
    char *ts = ldns_rr_type2str(s->type);
    snprintf(tname, sizeof(tname), "%s", ts ? ts : "?");
    free(ts);
    size_t i;
    const json_t *rec;
    json_array_foreach(recs, i, rec)
    {
        const char *content = json_string_value(json_object_get(rec, "content"));
        if (!json_is_object(rec) || !content)
            return fail(p, "Key 'content' not present or not a String");
        const json_t *dis = json_object_get(rec, "disabled");
        if (dis && !json_is_boolean(dis))
            return fail(p, "Key 'disabled' not a Boolean");
        if (json_is_true(dis))
            return fail(p,
                        "Record %s/%s '%s': disabled records are not supported (tern serves "
                        "every record it holds; leave the record out)",
                        owner, tname, content);
        if (json_object_get(rec, "priority"))
            return fail(p, "Record %s/%s '%s': `priority` element is not allowed in record", owner,
                        tname, content);
        /* one line for ldns: a newline or a comment would end the record early */
        if (strpbrk(content, "\n\r") || !content[0])
            return fail(p, "Record %s/%s '%s': not one record's content", owner, tname, content);
        size_t n = strlen(owner) + strlen(tname) + strlen(content) + 32;
        char *line = malloc(n);
        if (!line)
            return TERN_ENOMEM;
        snprintf(line, n, "%s %u IN %s %s", owner, ttl, tname, content);
        ldns_rr *rr = NULL;
        ldns_status st = ldns_rr_new_frm_str(&rr, line, ttl, p->apex, NULL);
        free(line);
        if (st != LDNS_STATUS_OK || !rr || ldns_rr_get_type(rr) != s->type ||
            ldns_dname_compare(ldns_rr_owner(rr), s->name) != 0) {
            ldns_rr_free(rr);
            return fail(p, "Record %s/%s '%s': %s", owner, tname, content,
                        st != LDNS_STATUS_OK ? ldns_get_errorstr_by_id(st)
                                             : "not one record of this name and type");
        }
        ldns_buffer *rd = ldns_buffer_new(512);
        if (!rd || ldns_rr_rdata2buffer_wire(rd, rr) != LDNS_STATUS_OK ||
            ldns_buffer_position(rd) > 65535) {
            ldns_buffer_free(rd);
            ldns_rr_free(rr);
            return rd ? fail(p, "Record %s/%s '%s': too long", owner, tname, content) : TERN_ENOMEM;
        }
        put_rr(p, s->name, s->type, del ? WIRE_CLASS_NONE : WIRE_CLASS_IN, ttl,
               ldns_buffer_begin(rd), ldns_buffer_position(rd));
        ldns_buffer_free(rd);
        ldns_rr_free(rr);
    }
    return 0;
}

/* rrset r: read, checked against the ones before it (seen[0..n)), then its update RRs. */
static int put_rrset(pctx_t *p, const json_t *r, prrset_t *seen, size_t n)
{
    prrset_t *s = &seen[n];
    if (!json_is_object(r))
        return fail(p, "RRset is not a JSON object");
    const char *ct = json_string_value(json_object_get(r, "changetype"));
    if (!ct)
        return fail(p, "Key 'changetype' not present or not a String");
    size_t c = 0;
    while (c < 4 && strcasecmp(ct, change_names[c]) != 0)
        c++;
    if (c == 4)
        return fail(p, "Changetype '%s' is not a valid value", ct);
    s->ch = (enum change)c;
    int rc = get_name_type(p, r, s);
    if (rc < 0)
        return rc;
    /* pdns: not checked for DELETE ("a poor man's way to fix out-of-zone records"); tern has
     * none, and the update service would answer NOTZONE: the same words here */
    if (!in_zone(p, s->name))
        return fail(p, "RRset %s: Name is out of zone", s->text);
    for (size_t i = 0; i < n; i++)
        if (seen[i].type == s->type && seen[i].ch == s->ch && s->ch <= CH_DELETE &&
            ldns_dname_compare(seen[i].name, s->name) == 0)
            return fail(p, "Duplicate RRset %s with changetype: %s", s->text, change_names[s->ch]);
    const json_t *recs = json_object_get(r, "records");
    const json_t *comments = json_object_get(r, "comments");
    if (recs && !json_is_array(recs))
        return fail(p, "RRset %s: 'records' is not an array", s->text);
    switch (s->ch) {
    case CH_DELETE:
        put_rr(p, s->name, s->type, WIRE_CLASS_ANY, 0, NULL, 0);
        return 0;
    case CH_REPLACE:
        if (!recs && !json_is_array(comments))
            return fail(p, "No change for RRset %s", s->text);
        if (!recs) /* comments only: tern keeps none */
            return 0;
        put_rr(p, s->name, s->type, WIRE_CLASS_ANY, 0, NULL, 0);
        return put_records(p, r, s, false);
    case CH_EXTEND:
    case CH_PRUNE:
        if (!recs)
            return fail(p, "RRset %s: no records given for %s", s->text, change_names[s->ch]);
        return put_records(p, r, s, s->ch == CH_PRUNE);
    }
    return 0;
}

int api_patch_build(const char *origin, const char *body, size_t len, tern_buf_t *msg,
                    size_t *nupdates, char *err, size_t errlen)
{
    pctx_t p = {.msg = msg, .err = err, .errlen = errlen};
    prrset_t *seen = NULL;
    json_error_t je;
    int rc = 0;
    *nupdates = 0;
    json_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!doc)
        return fail(&p, "JSON parse error: %s (line %d)", je.text, je.line);
    char apex[LDNS_MAX_DOMAINLEN + 2];
    snprintf(apex, sizeof(apex), "%s%s", origin, strcmp(origin, ".") == 0 ? "" : ".");
    const json_t *rrsets = json_object_get(doc, "rrsets");
    if (!json_is_object(doc) || !json_is_array(rrsets)) {
        rc = fail(&p, "No rrsets given in update request");
        goto out;
    }
    if (ldns_str2rdf_dname(&p.apex, apex) != LDNS_STATUS_OK) {
        rc = fail(&p, "bad zone name %s", apex);
        goto out;
    }
    ldns_dname2canonical(p.apex);
    size_t n = json_array_size(rrsets);
    if (n && !(seen = calloc(n, sizeof(*seen)))) {
        rc = TERN_ENOMEM;
        goto out;
    }
    /* the header (id 0: the message never goes on the wire) and the zone section */
    put16(msg, 0);
    put16(msg, (uint16_t)(WIRE_OP_UPDATE << 11));
    put16(msg, 1);
    put16(msg, 0);
    size_t upcount_at = msg->len;
    put16(msg, 0);
    put16(msg, 0);
    tern_buf_append(msg, ldns_rdf_data(p.apex), ldns_rdf_size(p.apex));
    put16(msg, WIRE_T_SOA);
    put16(msg, WIRE_CLASS_IN);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = put_rrset(&p, json_array_get(rrsets, i), seen, i);
    if (rc == 0 && msg->failed)
        rc = TERN_ENOMEM;
    else if (rc == 0 && (msg->len > PATCH_MSG_MAX || p.nupdates > 65535))
        rc = fail(&p, "the change does not fit one DNS message (%d bytes): send it in parts",
                  PATCH_MSG_MAX);
    if (rc == 0) {
        msg->p[upcount_at] = (char)(p.nupdates >> 8);
        msg->p[upcount_at + 1] = (char)p.nupdates;
        *nupdates = p.nupdates;
    }
out:
    for (size_t i = 0; seen && i < n; i++)
        ldns_rdf_deep_free(seen[i].name);
    free(seen);
    ldns_rdf_deep_free(p.apex);
    json_decref(doc);
    return rc;
}
