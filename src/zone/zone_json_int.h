/*
 * zone_json_int.h — private to src/zone: redins' JSON zones as zone_json.c, zone_json_get.c
 * and zone_json_rrset.c see them.
 *
 *   zone_json.c        the zone: its config block (SOA, dnssec, domain_id), its labels one by
 *                      one into the builder, finish, the whole-file form;
 *   zone_json_get.c    reading JSON values as redins' Go decoder (encoding/json) does, and the
 *                      error messages that name the field;
 *   zone_json_rrset.c  each RRset type of a label rendered to pending RDATA, with the A/AAAA
 *                      geo metadata and the RRset's filter and health_check blocks.
 *
 * Not thread-safe, like zone_json_t itself.
 */
#ifndef TERN_ZONE_ZONE_JSON_INT_H
#define TERN_ZONE_ZONE_JSON_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/wire/dname.h"
#include "tern/zone/zone_builder.h"
#include "tern/zone/zone_json.h"

/* Values quoted in messages are cut to this many bytes: enough to recognise, short enough for a
 * log line. */
#define QUOTE_MAX 64

/* Path strings: "a.records[65535].country[254]" and the like. */
#define PATH_MAX_LEN 96

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
    bool dnssec;            /* the config says "dnssec": true, or names a "dnssec_policy" */
    char dnssec_policy[64]; /* "dnssec_policy": the key policy's name; "" none */
    bool dnssec_unsign;     /* "dnssec_unsign": true (with a policy): unsign the zone */
    bool apex_ns;           /* an NS RR was added at the apex */
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

/* ---- zone_json_get.c: JSON values and messages ---------------------------------------------- */

/** The error of e's zone and part: "source: zone X <what>: " and the message into e->err;
 * returns rc. */
int zone_json_fail(const struct ectx *e, int rc, const char *fmt, ...) TERN_PRINTF(3, 4);

/** zone_json_fail() with "out of memory": TERN_ENOMEM. */
int zone_json_nomem(const struct ectx *e);

/** s (len bytes, untrusted) for a message: tern_escape()d, cut to about QUOTE_MAX bytes. */
const char *zone_json_quote(const char *s, size_t len, char buf[QUOTE_MAX + 4]);

/** "an object", "a string"... for "expected X, got Y". */
const char *zone_json_type_name(const json_t *v);

/** obj's member key, matched as encoding/json does (ASCII case-insensitively, the last of equal
 * keys winning); NULL when absent or null. obj must be an object. */
json_t *zone_json_field(json_t *obj, const char *key);

/** A field path for messages ("a.records[2].ip") into dst; cut if too long. Returns dst. */
const char *zone_json_pathf(char *dst, size_t len, const char *fmt, ...) TERN_PRINTF(3, 4);

/** "base.key" (or "key" at the top) into dst. Returns dst. */
const char *zone_json_join(char *dst, size_t len, const char *base, const char *key);

/* The getters: a field of obj (named base.key in messages) of the expected JSON type, or an
 * error; an absent or null field leaves the output as each one says. */

/** Unsigned integer up to max: *out unchanged when absent (*found false; found may be NULL). */
int zone_json_get_uint(const struct ectx *e, json_t *obj, const char *base, const char *key,
                       uint64_t max, uint64_t *out, bool *found);
/** zone_json_get_uint() into a uint32_t. */
int zone_json_get_u32(const struct ectx *e, json_t *obj, const char *base, const char *key,
                      uint32_t max, uint32_t *out);
/** String (not NUL-terminated for our purposes: *len bytes): *s NULL when absent. */
int zone_json_get_str(const struct ectx *e, json_t *obj, const char *base, const char *key,
                      const char **s, size_t *len);
/** Object: *o NULL when absent. */
int zone_json_get_obj(const struct ectx *e, json_t *obj, const char *base, const char *key,
                      json_t **o);
/** Boolean: *b unchanged when absent. */
int zone_json_get_bool(const struct ectx *e, json_t *obj, const char *base, const char *key,
                       bool *b);
/** An absolute name into out; *len 0 when absent or "" (callers decide what that means). */
int zone_json_get_name(const struct ectx *e, json_t *obj, const char *base, const char *key,
                       uint8_t *out, size_t *len);
/** The RRset's TTL: "ttl", 0 or absent meaning the default; capped by the handler's max_ttl. */
int zone_json_get_ttl(const struct ectx *e, json_t *set, const char *base, uint32_t *ttl);
/** The "records" array of an RRset: *arr NULL when absent; every element an object, at most
 * max_rrset_records (and what an RRset can hold) of them. */
int zone_json_get_records(const struct ectx *e, json_t *set, const char *base, json_t **arr);

/** redins takes one value or an array of them ("country": "US" or ["US", "CA"]). The number of
 * values of v in *n, after checking its shape (scalar_ok: v is one value) and the bound. */
int zone_json_one_or_many(const struct ectx *e, json_t *v, const char *path, bool scalar_ok,
                          const char *what, size_t max, size_t *n);
/** Value i of such a v, and its path for messages ("a.records[0].asn[1]", or the path itself). */
json_t *zone_json_one_or_many_at(json_t *v, size_t i, const char *path, char *epath, size_t len);

/* ---- zone_json_rrset.c: a label's RRsets ---------------------------------------------------- */

/** Empty p for the next label (its arrays are kept). */
void zone_json_rrset_reset(struct pend *p);

/** Free p's arrays. */
void zone_json_rrset_free(struct pend *p);

/** Render every RRset key of the label object obj ("a", "aaaa", "cname"...) into p, in a fixed
 * order; *cname true when a CNAME record was rendered. 0 or a negative TERN_E* (message in e). */
int zone_json_rrset_parse(const struct ectx *e, struct pend *p, json_t *obj, bool *cname);

/** The RDATA of each RRset the label rendered (with the length prefixes the zone stores) against
 * what the builder takes: the other per-RRset limit that would otherwise fail the whole zone. */
int zone_json_rrset_check_bytes(const struct ectx *e, const struct pend *p);

#endif
