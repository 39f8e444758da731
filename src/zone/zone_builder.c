/*
 * zone_builder.c — collect, validate and compile one zone.
 *
 * add() only appends: the owner is lowercased and interned (one id per distinct name), the RDATA
 * copied into one growing buffer. finish() does the work in passes over flat arrays, so a
 * million-record zone costs a counting sort, a few linear passes and one allocation per array:
 *   1. group records by owner (stable counting sort on the name id), then by type;
 *   2. per (owner, type) run: drop duplicate RDATA, take the lowest TTL, validate
 *      (SOA, CNAME, limits);
 *   3. insert every missing ancestor between a name and the apex as an empty non-terminal;
 *   4. attach steering policies and health endpoints (given per RR, or found by the health hook
 *      for records checked by address) to their A/AAAA runs;
 *   5. size and allocate the zone in its own arena, fill nodes, the node hash table, the
 *      RRsets (type order, file order inside), wildcard and cut pointers, NS/MX/SRV targets.
 */
#include "tern/zone/zone_builder.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/log.h"
#include "tern/common/mem.h"
#include "tern/wire/rdata.h"
#include "tern/wire/rr.h"

#define NO_ID UINT32_MAX

/* Runs of identical type at one owner up to this size are de-duplicated by comparing every pair;
 * larger ones (round-robin pools of hundreds of addresses) are sorted first so the cost stays
 * O(n log n). 16 keeps the quadratic case under ~120 short memcmp calls. */
#define DEDUP_PAIRWISE_MAX 16

struct bname {
    uint32_t off;    /* lowercased wire name at names + off */
    uint32_t hash;   /* dname_hash */
    uint32_t parent; /* id of the parent name (set in finish for every name below the apex) */
    uint32_t first;  /* finish: first run of this name, or NO_ID; after fill_rrsets() the index
                      * of its first RRset in the zone */
    uint8_t len;
    uint8_t labels;
    uint8_t nsets; /* fill_rrsets(): the name's RRsets, and its ZONE_NODE_DELEG/DNAME flags */
    uint8_t nflags;
};

/* The hash sits beside the id so a probe that misses does not touch the name array: with a
 * million names every such touch is a cache miss. */
struct nslot {
    uint32_t id;
    uint32_t hash;
};

struct brr {
    uint32_t rdoff; /* RDATA at rdata + rdoff (add_rr() keeps the RDATA under 4 GiB) */
    uint32_t name;  /* owner id */
    uint32_t ttl;
    uint32_t line;
    uint32_t file; /* index into files */
    uint32_t meta; /* 1 + index into meta[] (geo metadata of an A/AAAA RR), 0 = none */
    uint16_t type;
    uint16_t rdlen;
    uint8_t dup; /* finish: duplicate of an earlier RR of the same RRset */
};

/* Geo metadata of one RR as add_geo() got it; the lists live in ccs[] and asns[]. */
struct bmeta {
    uint32_t weight;
    uint32_t cc_off; /* ccs[cc_off .. cc_off + ncc) */
    uint32_t asn_off;
    uint16_t nasn;
    uint8_t ncc;
    uint8_t has_loc;
    float loc[3];
    health_ep_t *health; /* one of the builder's references (eps), or NULL */
};

/* A steering policy set for (owner, type); the owner is resolved to a name in finish, so a
 * policy may come before its RRs and one for a name without RRs creates no node. */
struct bpol {
    uint32_t owner; /* lowercased wire name at polnames + owner */
    uint8_t len;
    uint16_t type;
    zone_geo_policy_t p;
};

/* finish: one (owner, type) group of kept records, ord[start .. start+n) with dups marked */
struct brun {
    uint32_t start;
    uint32_t n;     /* records in ord, duplicates included */
    uint32_t kept;  /* after de-duplication */
    uint32_t ttl;   /* lowest of the kept records */
    uint32_t bytes; /* RDATA sequence length */
    uint16_t type;
};

struct zone_builder {
    uint8_t apex[DNAME_MAXLEN];
    uint8_t apex_len;
    uint8_t apex_labels;
    char *source;

    uint8_t *names; /* interned lowercased owner names, back to back */
    size_t names_len, names_cap;
    struct bname *nm;
    uint32_t nm_count, nm_cap;
    struct nslot *nm_slots; /* open addressing over name ids, id NO_ID = empty */
    uint32_t nm_mask;
    uint32_t last_name; /* cache: consecutive records usually share their owner */

    struct brr *rr;
    size_t rr_count, rr_cap;
    uint8_t *rdata;
    size_t rdata_len, rdata_cap;

    struct bmeta *meta;
    size_t meta_count, meta_cap;
    uint16_t *ccs;
    size_t cc_count, cc_cap;
    uint32_t *asns;
    size_t asn_count, asn_cap;
    struct bpol *pol;
    size_t pol_count, pol_cap;
    uint8_t *polnames;
    size_t polnames_len, polnames_cap;

    char **files;
    uint32_t file_count, file_cap;
    uint32_t last_file;

    zone_builder_health_fn health_fn;
    void *health_ctx;
    health_ep_t **eps; /* every health reference the builder holds, released with it */
    size_t eps_count, eps_cap;

    /* zone_builder_set_dnssec(): the signer's DNSKEYs, added at the apex by finish() */
    bool dnssec;
    uint8_t *dnskeys; /* rdata sequence */
    size_t dnskeys_len;
    uint32_t dnskey_ttl;
    size_t dnssec_dropped;
    char *domain_id; /* zone_builder_set_domain_id() */
    size_t domain_id_len;

    char err[512];
};

static void set_err(zone_builder_t *b, const char *fmt, ...) TERN_PRINTF(2, 3);
static void set_err(zone_builder_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err, sizeof(b->err), fmt, ap);
    va_end(ap);
}

/* "file:line" of a record, or "zone X" when it came from nowhere in particular. */
static void where(const zone_builder_t *b, const struct brr *r, char *dst, size_t len)
{
    if (r && r->file != NO_ID)
        snprintf(dst, len, "%s:%" PRIu32, b->files[r->file], r->line);
    else
        snprintf(dst, len, "zone %s", b->source);
}

static void name_str(const zone_builder_t *b, uint32_t id, char *dst, size_t len)
{
    if (dname_to_str(b->names + b->nm[id].off, dst, len) < 0 && len > 4)
        strcpy(dst + len - 4, "...");
}

zone_builder_t *zone_builder_new(const uint8_t *origin, const char *source)
{
    zone_builder_t *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->apex_len = (uint8_t)dname_lower(b->apex, origin);
    b->apex_labels = (uint8_t)dname_labels(b->apex);
    if (!source) {
        char buf[DNAME_MAXLEN * 4 + 1];
        (void)dname_to_str(b->apex, buf, sizeof(buf));
        b->source = strdup(buf);
    } else {
        b->source = strdup(source);
    }
    if (!b->source)
        goto fail;
    b->last_name = NO_ID;
    b->last_file = NO_ID;
    return b;
fail:
    zone_builder_free(b);
    return NULL;
}

void zone_builder_free(zone_builder_t *b)
{
    if (!b)
        return;
    free(b->dnskeys);
    for (uint32_t i = 0; i < b->file_count; i++)
        free(b->files[i]);
    free(b->files);
    free(b->names);
    free(b->nm);
    free(b->nm_slots);
    free(b->rr);
    free(b->rdata);
    free(b->meta);
    free(b->ccs);
    free(b->asns);
    free(b->pol);
    free(b->polnames);
    free(b->source);
    free(b->domain_id);
    for (size_t i = 0; i < b->eps_count; i++)
        health_ep_release(b->eps[i]);
    free(b->eps);
    free(b);
}

void zone_builder_set_health(zone_builder_t *b, zone_builder_health_fn fn, void *ctx)
{
    b->health_fn = fn;
    b->health_ctx = ctx;
}

/* Keep one reference to ep (already taken) until the builder is freed. */
static int keep_ep(zone_builder_t *b, health_ep_t *ep)
{
    if (tern_grow((void **)&b->eps, &b->eps_cap, b->eps_count + 1, sizeof(*b->eps)) < 0)
        return TERN_ENOMEM;
    b->eps[b->eps_count++] = ep;
    return 0;
}

const char *zone_builder_error(const zone_builder_t *b)
{
    return b->err;
}

/* Name id of lcname, or NO_ID. */
static uint32_t name_find(const zone_builder_t *b, const uint8_t *lc, size_t len, uint32_t hash)
{
    if (!b->nm_slots)
        return NO_ID;
    for (uint32_t i = hash & b->nm_mask;; i = (i + 1) & b->nm_mask) {
        const struct nslot *sl = &b->nm_slots[i];
        if (sl->id == NO_ID)
            return NO_ID;
        if (sl->hash != hash)
            continue;
        const struct bname *n = &b->nm[sl->id];
        if (n->len == len && memcmp(b->names + n->off, lc, len) == 0)
            return sl->id;
    }
}

static void slot_put(struct nslot *slots, uint32_t mask, uint32_t hash, uint32_t id)
{
    uint32_t i = hash & mask;
    while (slots[i].id != NO_ID)
        i = (i + 1) & mask;
    slots[i].id = id;
    slots[i].hash = hash;
}

/* Keep the interning table at most half full (short linear probe chains). */
static int name_reserve(zone_builder_t *b, uint32_t count)
{
    if (b->nm_slots && (uint64_t)count * 2 <= (uint64_t)b->nm_mask + 1)
        return 0;
    uint64_t size = TERN_GROW_MIN;
    while (size < (uint64_t)count * 2)
        size *= 2;
    if (size > UINT32_MAX)
        return TERN_ENOMEM;
    struct nslot *slots = malloc(size * sizeof(*slots));
    if (!slots)
        return TERN_ENOMEM;
    memset(slots, 0xff, size * sizeof(*slots));
    uint32_t mask = (uint32_t)(size - 1);
    for (uint32_t id = 0; id < b->nm_count; id++)
        slot_put(slots, mask, b->nm[id].hash, id);
    free(b->nm_slots);
    b->nm_slots = slots;
    b->nm_mask = mask;
    return 0;
}

/* Intern a name whose bytes are already at names + off (a suffix of an interned name), or copy
 * lc in when off is NO_ID. Returns 0 and the id in *id. */
static int name_add(zone_builder_t *b, const uint8_t *lc, size_t len, uint32_t hash, size_t off,
                    uint32_t *id)
{
    int rc = name_reserve(b, b->nm_count + 1);
    if (rc < 0)
        return rc;
    size_t cap = b->nm_cap;
    rc = tern_grow((void **)&b->nm, &cap, (size_t)b->nm_count + 1, sizeof(*b->nm));
    if (rc < 0)
        return rc;
    b->nm_cap = (uint32_t)cap;
    if (off == NO_ID) {
        if (b->names_len + len > UINT32_MAX)
            return TERN_ENOMEM;
        rc = tern_grow((void **)&b->names, &b->names_cap, b->names_len + len, 1);
        if (rc < 0)
            return rc;
        off = b->names_len;
        memcpy(b->names + off, lc, len);
        b->names_len += len;
    }
    struct bname *n = &b->nm[b->nm_count];
    n->off = (uint32_t)off;
    n->hash = hash;
    n->parent = NO_ID;
    n->first = NO_ID;
    n->len = (uint8_t)len;
    n->labels = (uint8_t)dname_labels(lc);
    slot_put(b->nm_slots, b->nm_mask, hash, b->nm_count);
    *id = b->nm_count++;
    return 0;
}

static int file_id(zone_builder_t *b, const char *file, uint32_t *id)
{
    if (!file) {
        *id = NO_ID;
        return 0;
    }
    if (b->last_file != NO_ID && strcmp(b->files[b->last_file], file) == 0) {
        *id = b->last_file;
        return 0;
    }
    for (uint32_t i = 0; i < b->file_count; i++) {
        if (strcmp(b->files[i], file) == 0) {
            *id = b->last_file = i;
            return 0;
        }
    }
    size_t cap = b->file_cap;
    int rc = tern_grow((void **)&b->files, &cap, (size_t)b->file_count + 1, sizeof(*b->files));
    if (rc < 0)
        return rc;
    b->file_cap = (uint32_t)cap;
    char *copy = strdup(file);
    if (!copy)
        return TERN_ENOMEM;
    b->files[b->file_count] = copy;
    *id = b->last_file = b->file_count++;
    return 0;
}

/* A name that must fill rdata[off..rdlen) exactly (end == true) or start there. Returns the
 * offset after the name, or -1. */
static int rdata_name(const uint8_t *rdata, size_t rdlen, size_t off)
{
    if (off >= rdlen)
        return -1;
    int n = dname_check(rdata + off, rdlen - off);
    return n < 0 ? -1 : (int)off + n;
}

/* Shape checks for the types whose RDATA the zone itself interprets (names for targets and
 * compression, the SOA fields) and the two address types, so a bad record from any loader fails
 * here rather than producing a broken answer. Other types are opaque (RFC 3597). */
static bool rdata_ok(uint16_t type, const uint8_t *rdata, size_t rdlen)
{
    int end;
    switch (type) {
    case WIRE_T_A:
        return rdlen == 4;
    case WIRE_T_AAAA:
        return rdlen == 16;
    case WIRE_T_NS:
    case WIRE_T_CNAME:
    case WIRE_T_PTR:
    case WIRE_T_DNAME:
    case WIRE_T_ANAME:
        return rdata_name(rdata, rdlen, 0) == (int)rdlen;
    case WIRE_T_MX:
        return rdata_name(rdata, rdlen, 2) == (int)rdlen;
    case WIRE_T_SRV:
        return rdata_name(rdata, rdlen, 6) == (int)rdlen;
    case WIRE_T_SOA:
        end = rdata_name(rdata, rdlen, 0);
        if (end < 0)
            return false;
        end = rdata_name(rdata, rdlen, (size_t)end);
        return end >= 0 && (size_t)end + 20 == rdlen;
    default:
        return true;
    }
}

/* "file:line" or "zone X" for messages about a record being added. */
static void add_loc(const zone_builder_t *b, const char *file, unsigned line, char *dst, size_t len)
{
    if (file)
        snprintf(dst, len, "%s:%u", file, line);
    else
        snprintf(dst, len, "zone %s", b->source);
}

/* The location of a record for a message, made only when one is needed: formatting it for each
 * of a million records was a measurable part of loading them. */
#define LOC() (add_loc(b, file, line, loc, sizeof(loc)), loc)

/* The name id of owner, interned if new. TERN_EOUTZONE (message set) or TERN_ENOMEM. */
static int intern_owner(zone_builder_t *b, const uint8_t *owner, const char *file, unsigned line,
                        uint32_t *out)
{
    char loc[512];
    uint8_t lc[DNAME_MAXLEN];
    size_t len = dname_lower(lc, owner);
    unsigned labels = dname_labels(lc);
    /* In zone: the owner's last apex_labels labels are the apex. */
    const uint8_t *tail = lc;
    if (labels < b->apex_labels)
        goto outzone;
    for (unsigned i = 0; i < labels - b->apex_labels; i++)
        tail += *tail + 1;
    if ((size_t)(lc + len - tail) != b->apex_len || memcmp(tail, b->apex, b->apex_len) != 0)
        goto outzone;

    uint32_t id = b->last_name;
    if (id == NO_ID || b->nm[id].len != len || memcmp(b->names + b->nm[id].off, lc, len) != 0) {
        uint32_t hash = dname_hash(lc);
        id = name_find(b, lc, len, hash);
        if (id == NO_ID) {
            int rc = name_add(b, lc, len, hash, NO_ID, &id);
            if (rc < 0) {
                set_err(b, "%s: out of memory", LOC());
                return TERN_ENOMEM;
            }
        }
        b->last_name = id;
    }
    *out = id;
    return 0;

outzone : {
    char n[DNAME_MAXLEN * 4 + 1], z[DNAME_MAXLEN * 4 + 1];
    (void)dname_to_str(owner, n, sizeof(n));
    (void)dname_to_str(b->apex, z, sizeof(z));
    set_err(b, "%s: %s is outside zone %s", LOC(), n, z);
    return TERN_EOUTZONE;
}
}

static int add_rr(zone_builder_t *b, const uint8_t *owner, uint16_t type, uint16_t rclass,
                  uint32_t ttl, const uint8_t *rdata, uint16_t rdlen, const char *file,
                  unsigned line, uint32_t meta)
{
    char loc[512];

    if (rclass != 1) {
        set_err(b, "%s: class %u is not supported (only IN)", LOC(), rclass);
        return TERN_EINVAL;
    }
    /* Type 0 is reserved; OPT and 128-255 (TKEY, TSIG, IXFR, AXFR, MAILB, MAILA, ANY...) are
     * meta or query types (RFC 6895 §3.1) and never zone data. */
    if (type == 0 || type == WIRE_T_OPT || (type >= 128 && type <= 255)) {
        set_err(b, "%s: type %u is a meta or query type, not zone data", LOC(), type);
        return TERN_EINVAL;
    }
    if (!rdata_ok(type, rdata, rdlen)) {
        set_err(b, "%s: malformed RDATA for type %u", LOC(), type);
        return TERN_EINVAL;
    }
    /* A zone tern signs gets its signatures and denial from the signer: what a source brings
     * of its own would be stale or contradict them (the loader reports the count). */
    if (b->dnssec && (type == WIRE_T_RRSIG || type == WIRE_T_NSEC || type == WIRE_T_NSEC3 ||
                      type == WIRE_T_NSEC3PARAM)) {
        b->dnssec_dropped++;
        return 0;
    }
    uint32_t id;
    int rc = intern_owner(b, owner, file, line, &id);
    if (rc < 0)
        return rc;

    uint32_t fid;
    if (file_id(b, file, &fid) < 0)
        goto nomem;
    if (b->rdata_len + rdlen > UINT32_MAX) {
        set_err(b, "%s: the zone's RDATA passes 4 GiB", LOC());
        return TERN_ELIMIT;
    }
    if (tern_grow((void **)&b->rr, &b->rr_cap, b->rr_count + 1, sizeof(*b->rr)) < 0 ||
        tern_grow((void **)&b->rdata, &b->rdata_cap, b->rdata_len + rdlen, 1) < 0)
        goto nomem;
    struct brr *r = &b->rr[b->rr_count++];
    r->rdoff = (uint32_t)b->rdata_len;
    r->name = id;
    r->ttl = ttl;
    r->line = line;
    r->file = fid;
    r->meta = meta;
    r->type = type;
    r->rdlen = rdlen;
    r->dup = 0;
    if (rdlen)
        memcpy(b->rdata + b->rdata_len, rdata, rdlen);
    b->rdata_len += rdlen;
    return 0;
nomem:
    set_err(b, "%s: out of memory", LOC());
    return TERN_ENOMEM;
}

void zone_builder_expect(zone_builder_t *b, size_t records)
{
    if (records > ZONE_BUILDER_EXPECT_MAX) /* a file's size is no promise: see the header */
        records = ZONE_BUILDER_EXPECT_MAX;
    /* a record brings at most one new name; a name is some 20 bytes, a record's RDATA 4 to 20 */
    size_t names = records / 4 * 3, nm_cap = b->nm_cap;
    if (tern_grow((void **)&b->rr, &b->rr_cap, records, sizeof(*b->rr)) < 0 ||
        tern_grow((void **)&b->rdata, &b->rdata_cap, records * 16, 1) < 0 ||
        tern_grow((void **)&b->nm, &nm_cap, names, sizeof(*b->nm)) < 0)
        return; /* no room ahead: the arrays grow as they fill */
    b->nm_cap = (uint32_t)nm_cap;
    (void)!tern_grow((void **)&b->names, &b->names_cap, names * 24, 1);
    /* not the name index: it is written (emptied) when made, so it grows with the names */
}

/* *dst (of *dst_len bytes) becomes a copy of src[0..len). 0 or TERN_ENOMEM (*dst unchanged). */
static int replace_bytes(void **dst, size_t *dst_len, const void *src, size_t len)
{
    void *p = malloc(len ? len : 1);
    if (!p)
        return TERN_ENOMEM;
    memcpy(p, src, len);
    free(*dst);
    *dst = p;
    *dst_len = len;
    return 0;
}

int zone_builder_set_domain_id(zone_builder_t *b, const char *id, size_t len)
{
    if (len > ZONE_DOMAIN_ID_MAX)
        return TERN_EINVAL;
    void *p = b->domain_id;
    int rc = replace_bytes(&p, &b->domain_id_len, id, len);
    b->domain_id = p;
    return rc;
}

int zone_builder_set_dnssec(zone_builder_t *b, const uint8_t *dnskeys, size_t len, uint32_t ttl)
{
    void *p = b->dnskeys;
    int rc = replace_bytes(&p, &b->dnskeys_len, dnskeys, len);
    b->dnskeys = p;
    if (rc < 0)
        return rc;
    b->dnskey_ttl = ttl;
    b->dnssec = true;
    return 0;
}

size_t zone_builder_dnssec_dropped(const zone_builder_t *b)
{
    return b->dnssec_dropped;
}

/* The signer's DNSKEYs at the apex, beside any the source publishes itself (a key being rolled
 * in or out); the TTL is the SOA's when the source has one, like the rest of the apex. */
static int add_dnskeys(zone_builder_t *b)
{
    uint32_t ttl = b->dnskey_ttl;
    uint32_t apex = name_find(b, b->apex, b->apex_len, dname_hash(b->apex));
    for (size_t i = 0; i < b->rr_count && !ttl && apex != NO_ID; i++)
        if (b->rr[i].type == WIRE_T_SOA && b->rr[i].name == apex)
            ttl = b->rr[i].ttl;
    for (size_t pos = 0; pos + 2 <= b->dnskeys_len;) {
        uint16_t l = (uint16_t)(b->dnskeys[pos] << 8 | b->dnskeys[pos + 1]);
        int rc = add_rr(b, b->apex, WIRE_T_DNSKEY, 1, ttl ? ttl : 3600, b->dnskeys + pos + 2, l,
                        NULL, 0, 0);
        if (rc < 0)
            return rc;
        pos += 2u + l;
    }
    return 0;
}

bool zone_builder_has_owner(const zone_builder_t *b, const uint8_t *owner)
{
    uint8_t lc[DNAME_MAXLEN];
    size_t len = dname_lower(lc, owner);
    return name_find(b, lc, len, dname_hash(lc)) != NO_ID;
}

int zone_builder_add(zone_builder_t *b, const uint8_t *owner, uint16_t type, uint16_t rclass,
                     uint32_t ttl, const uint8_t *rdata, uint16_t rdlen, const char *file,
                     unsigned line)
{
    return add_rr(b, owner, type, rclass, ttl, rdata, rdlen, file, line, 0);
}

/* Latitude and longitude (degrees) as a unit vector: the dot product of two of them is the
 * cosine of their great-circle angle, so "nearest" is "largest dot product". */
static void unit_vector(double lat, double lon, float v[3])
{
    const double rad = 3.14159265358979323846 / 180.0;
    double cl = cos(lat * rad);
    v[0] = (float)(cl * cos(lon * rad));
    v[1] = (float)(cl * sin(lon * rad));
    v[2] = (float)sin(lat * rad);
}

int zone_builder_add_geo(zone_builder_t *b, const uint8_t *owner, uint16_t type, uint32_t ttl,
                         const uint8_t *rdata, uint16_t rdlen, const zone_geo_meta_t *meta,
                         const char *file, unsigned line)
{
    char loc[512];
    if (type != WIRE_T_A && type != WIRE_T_AAAA) {
        set_err(b, "%s: geo metadata on type %u (only A and AAAA are steered)", LOC(), type);
        return TERN_EINVAL;
    }
    if (!meta)
        return add_rr(b, owner, type, 1, ttl, rdata, rdlen, file, line, 0);
    if (meta->ncountries > UINT8_MAX || meta->nasns > UINT16_MAX) {
        set_err(b, "%s: more than %u countries or %u ASNs on one record", LOC(), UINT8_MAX,
                UINT16_MAX);
        return TERN_ELIMIT;
    }
    if (meta->has_location && !(fabs(meta->lat) <= 90.0 && fabs(meta->lon) <= 180.0)) {
        set_err(b, "%s: location %g,%g is not a latitude,longitude", LOC(), meta->lat, meta->lon);
        return TERN_EINVAL;
    }
    if (tern_grow((void **)&b->meta, &b->meta_cap, b->meta_count + 1, sizeof(*b->meta)) < 0 ||
        tern_grow((void **)&b->eps, &b->eps_cap, b->eps_count + 1, sizeof(*b->eps)) < 0 ||
        tern_grow((void **)&b->ccs, &b->cc_cap, b->cc_count + meta->ncountries, sizeof(*b->ccs)) <
            0 ||
        tern_grow((void **)&b->asns, &b->asn_cap, b->asn_count + meta->nasns, sizeof(*b->asns)) <
            0) {
        set_err(b, "%s: out of memory", LOC());
        return TERN_ENOMEM;
    }
    struct bmeta *m = &b->meta[b->meta_count];
    *m = (struct bmeta){.weight = meta->weight,
                        .cc_off = (uint32_t)b->cc_count,
                        .asn_off = (uint32_t)b->asn_count,
                        .nasn = (uint16_t)meta->nasns,
                        .ncc = (uint8_t)meta->ncountries,
                        .has_loc = meta->has_location};
    if (meta->has_location)
        unit_vector(meta->lat, meta->lon, m->loc);
    int rc = add_rr(b, owner, type, 1, ttl, rdata, rdlen, file, line, (uint32_t)b->meta_count + 1);
    if (rc < 0)
        return rc;
    if (meta->ncountries)
        memcpy(b->ccs + b->cc_count, meta->countries, meta->ncountries * sizeof(*b->ccs));
    if (meta->nasns)
        memcpy(b->asns + b->asn_count, meta->asns, meta->nasns * sizeof(*b->asns));
    if (meta->health) {
        health_ep_retain(meta->health); /* room was made above: cannot fail now */
        b->eps[b->eps_count++] = meta->health;
        m->health = meta->health;
    }
    b->cc_count += meta->ncountries;
    b->asn_count += meta->nasns;
    b->meta_count++;
    return 0;
}

int zone_builder_set_policy(zone_builder_t *b, const uint8_t *owner, uint16_t type,
                            const zone_geo_policy_t *policy)
{
    char loc[512];
    add_loc(b, NULL, 0, loc, sizeof(loc));
    if (type != WIRE_T_A && type != WIRE_T_AAAA) {
        set_err(b, "%s: a steering policy on type %u (only A and AAAA are steered)", loc, type);
        return TERN_EINVAL;
    }
    if (policy->filter > ZONE_GEO_FILTER_LOCATION || policy->count > ZONE_GEO_COUNT_SINGLE ||
        policy->order > ZONE_GEO_ORDER_RR) {
        set_err(b, "%s: invalid steering policy", loc);
        return TERN_EINVAL;
    }
    uint8_t lc[DNAME_MAXLEN];
    size_t len = dname_lower(lc, owner);
    unsigned labels = dname_labels(lc);
    const uint8_t *tail = lc;
    for (unsigned i = 0; labels >= b->apex_labels && i < labels - b->apex_labels; i++)
        tail += *tail + 1;
    if (labels < b->apex_labels || (size_t)(lc + len - tail) != b->apex_len ||
        memcmp(tail, b->apex, b->apex_len) != 0) {
        char n[DNAME_MAXLEN * 4 + 1];
        (void)dname_to_str(owner, n, sizeof(n));
        set_err(b, "%s: %s is outside the zone", loc, n);
        return TERN_EOUTZONE;
    }
    if (tern_grow((void **)&b->pol, &b->pol_cap, b->pol_count + 1, sizeof(*b->pol)) < 0 ||
        tern_grow((void **)&b->polnames, &b->polnames_cap, b->polnames_len + len, 1) < 0) {
        set_err(b, "%s: out of memory", loc);
        return TERN_ENOMEM;
    }
    memcpy(b->polnames + b->polnames_len, lc, len);
    /* appended, never searched: a later policy for the same RRset wins in finish */
    b->pol[b->pol_count++] = (struct bpol){
        .owner = (uint32_t)b->polnames_len, .len = (uint8_t)len, .type = type, .p = *policy};
    b->polnames_len += len;
    return 0;
}

/* ---- finish ---------------------------------------------------------------------------- */

/* Everything finish() computes, pass by pass; each pass reads what the earlier ones filled. */
struct fctx {
    zone_builder_t *b;
    char *err;
    size_t errlen;
    char zname[DNAME_MAXLEN * 4 + 1]; /* the apex, for messages */

    /* group_runs() */
    uint32_t *ord; /* record indexes grouped by owner, then type, then file order */
    struct brun *runs;
    size_t run_count;
    uint32_t *run_next;         /* per run: next run of the same owner, or NO_ID */
    zone_geo_policy_t *run_pol; /* attach_policies(): per run its steering (all 0 = plain) */
    health_ep_t **rr_health;    /* attach_health(): per record its endpoint, or NULL */
    bool *run_health;           /* attach_health(): the run has a checked RR */
    uint32_t *bylabel;          /* order_by_labels(): name ids, parents before children */

    /* measure() */
    size_t nnodes, slots, ntargets, nrr, rdbytes, ngeo, ngeo_rr, ngeo_cc, ngeo_asn, nhealth;

    /* allocate() and the fill passes: the zone's arrays in one arena, the bytes they point into
     * (names, RDATA, geo lists) in another (zone.h: zone_data_t) */
    arena_t *arena;
    arena_t *darena;
    zone_t *z;
    uint32_t *kids;
    zone_node_t **pages; /* the zone's node pages (zone.h), npages; owned by the zone once built */
    size_t npages;
    bool pages_given;
    zone_slot_t *slot;
    uint8_t *names;
    zone_rrset_t *sets;
    uint8_t *rd;
    uint32_t *targets;
    const uint8_t **tnames; /* target names, resolved once every node is in the table */
    zone_geo_t *geo;
    zone_geo_rr_t *geo_rr;
    uint16_t *geo_cc;
    uint32_t *geo_asn;
    health_ep_t **health; /* the zone's endpoint list, nhealth slots (fill_health()) */
};

static int fail_msg(struct fctx *f, int rc, const char *fmt, ...) TERN_PRINTF(3, 4);
static int fail_msg(struct fctx *f, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->err, f->errlen, fmt, ap);
    va_end(ap);
    return rc;
}

static int nomem(struct fctx *f)
{
    return fail_msg(f, TERN_ENOMEM, "zone %s: out of memory", f->zname);
}

/* qsort_r (glibc, _GNU_SOURCE) comparators: the context is the builder. */
static int cmp_type_seq(const void *pa, const void *pb, void *ctx)
{
    const zone_builder_t *zb = ctx;
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    const struct brr *ra = &zb->rr[a], *rb = &zb->rr[b];
    if (ra->type != rb->type)
        return ra->type < rb->type ? -1 : 1;
    return a < b ? -1 : a > b;
}

/* dedup()'s view of a run: each RR's RDATA in canonical form (names lowercased, RFC 4034
 * §6.2), so RRs that differ only in the case of a name inside them are one RR (RFC 2181 §5). */
struct canon {
    const uint8_t *bytes;
    const size_t *off; /* per position in the run */
    const uint16_t *len;
};

static int cmp_canon_seq(const void *pa, const void *pb, void *ctx)
{
    const struct canon *c = ctx;
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    if (c->len[a] != c->len[b])
        return c->len[a] < c->len[b] ? -1 : 1;
    int d = memcmp(c->bytes + c->off[a], c->bytes + c->off[b], c->len[a]);
    if (d)
        return d;
    return a < b ? -1 : a > b;
}

static bool same_canon(const struct canon *c, uint32_t a, uint32_t b)
{
    return c->len[a] == c->len[b] &&
           memcmp(c->bytes + c->off[a], c->bytes + c->off[b], c->len[a]) == 0;
}

/* Mark duplicates in ord[0..n) (one owner, one type, file order); the first of equals stays,
 * with its own spelling. */
static int dedup(zone_builder_t *b, const uint32_t *ord, uint32_t n, uint16_t type)
{
    if (n < 2)
        return 0;
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += b->rr[ord[i]].rdlen;
    uint8_t *bytes = malloc(total ? total : 1);
    size_t *off = malloc((size_t)n * sizeof(*off));
    uint16_t *len = malloc((size_t)n * sizeof(*len));
    uint32_t *pos = malloc((size_t)n * sizeof(*pos));
    int rc = TERN_ENOMEM;
    if (!bytes || !off || !len || !pos)
        goto out;
    size_t o = 0;
    for (uint32_t i = 0; i < n; i++) {
        const struct brr *x = &b->rr[ord[i]];
        wire_rdata_canon(type, b->rdata + x->rdoff, x->rdlen, bytes + o);
        off[i] = o;
        len[i] = x->rdlen;
        pos[i] = i;
        o += x->rdlen;
    }
    struct canon c = {bytes, off, len};
    if (n <= DEDUP_PAIRWISE_MAX) {
        for (uint32_t i = 1; i < n; i++)
            for (uint32_t j = 0; j < i; j++)
                if (!b->rr[ord[j]].dup && same_canon(&c, i, j)) {
                    b->rr[ord[i]].dup = 1;
                    break;
                }
    } else {
        /* equal ones end up in file order: the earliest stays */
        qsort_r(pos, n, sizeof(*pos), cmp_canon_seq, &c);
        for (uint32_t i = 1; i < n; i++)
            if (same_canon(&c, pos[i], pos[i - 1]))
                b->rr[ord[pos[i]]].dup = 1;
    }
    rc = 0;
out:
    free(bytes);
    free(off);
    free(len);
    free(pos);
    return rc;
}

/* Kept record number k (0-based) of run r. */
static const struct brr *run_kept(const zone_builder_t *b, const struct fctx *f,
                                  const struct brun *r, uint32_t k)
{
    for (uint32_t i = 0; i < r->n; i++) {
        const struct brr *x = &b->rr[f->ord[r->start + i]];
        if (!x->dup && k-- == 0)
            return x;
    }
    return NULL;
}

/* The first kept record of run r. */
static const struct brr *run_first(const zone_builder_t *b, const struct fctx *f,
                                   const struct brun *r)
{
    return run_kept(b, f, r, 0);
}

/* De-duplicate run r (of name id) and take its lowest TTL; the per-RRset limits. */
static int measure_run(struct fctx *f, uint32_t id, struct brun *r)
{
    zone_builder_t *b = f->b;
    char w[600], nbuf[DNAME_MAXLEN * 4 + 1];
    int rc = dedup(b, f->ord + r->start, r->n, r->type);
    if (rc < 0)
        return nomem(f);
    r->kept = 0;
    r->bytes = 0;
    r->ttl = UINT32_MAX;
    const struct brr *first = NULL;
    bool ttl_differs = false;
    for (uint32_t i = 0; i < r->n; i++) {
        const struct brr *x = &b->rr[f->ord[r->start + i]];
        if (x->dup)
            continue;
        if (!first)
            first = x;
        else if (x->ttl != first->ttl)
            ttl_differs = true;
        r->kept++;
        r->bytes += 2u + x->rdlen;
        if (x->ttl < r->ttl)
            r->ttl = x->ttl;
    }
    if (r->kept > ZONE_BUILDER_MAX_RRSET_RRS || r->bytes > ZONE_BUILDER_MAX_RRSET_BYTES) {
        where(b, first, w, sizeof(w));
        name_str(b, id, nbuf, sizeof(nbuf));
        return fail_msg(f, TERN_ELIMIT, "%s: RRset %s type %u has more than %u records", w, nbuf,
                        r->type, ZONE_BUILDER_MAX_RRSET_RRS);
    }
    if (ttl_differs) {
        where(b, first, w, sizeof(w));
        name_str(b, id, nbuf, sizeof(nbuf));
        log_warn("%s: RRset %s type %u has records with different TTLs; using the lowest, %" PRIu32
                 " (RFC 2181 section 5.2)",
                 w, nbuf, r->type, r->ttl);
    }
    return 0;
}

/* The owner's name in nbuf, made only when a message needs it (a zone of a million names checks
 * millions of RRsets and names, nearly all of them fine). */
#define NAME() (name_str(b, id, nbuf, sizeof(nbuf)), nbuf)

/* The rules about one RRset alone: one SOA, at the apex; one CNAME per name. */
static int check_run(struct fctx *f, uint32_t id, const struct brun *r)
{
    zone_builder_t *b = f->b;
    char w1[600], w2[600], nbuf[DNAME_MAXLEN * 4 + 1];
    if (r->type == WIRE_T_SOA && id != 0) {
        where(b, run_first(b, f, r), w1, sizeof(w1));
        return fail_msg(f, TERN_EINVAL, "%s: SOA record %s is not at the zone apex", w1, NAME());
    }
    if (r->type == WIRE_T_SOA && r->kept > 1) {
        where(b, run_kept(b, f, r, 1), w1, sizeof(w1));
        return fail_msg(f, TERN_EINVAL, "%s: more than one SOA record at the apex %s", w1, NAME());
    }
    if ((r->type == WIRE_T_CNAME || r->type == WIRE_T_DNAME || r->type == WIRE_T_ANAME) &&
        r->kept > 1) {
        /* RFC 6672 §2.4: like a CNAME, at most one DNAME per name; an ANAME names one target */
        where(b, run_kept(b, f, r, 1), w1, sizeof(w1));
        where(b, run_first(b, f, r), w2, sizeof(w2));
        return fail_msg(f, TERN_ECNAME, "%s: second %s record at %s (first at %s)", w1,
                        r->type == WIRE_T_CNAME   ? "CNAME"
                        : r->type == WIRE_T_DNAME ? "DNAME"
                                                  : "ANAME",
                        NAME(), w2);
    }
    return 0;
}

/* The rules about the RRsets of one name together. */
static int check_name(struct fctx *f, uint32_t id)
{
    zone_builder_t *b = f->b;
    char w1[600], w2[600], nbuf[DNAME_MAXLEN * 4 + 1];
    const struct brr *cname = NULL, *other = NULL, *ns = NULL, *dname = NULL;
    unsigned nsets = 0;
    for (uint32_t ri = b->nm[id].first; ri != NO_ID; ri = f->run_next[ri]) {
        const struct brun *r = &f->runs[ri];
        const struct brr *first = run_first(b, f, r);
        nsets++;
        if (r->type == WIRE_T_CNAME)
            cname = first;
        else if (r->type != WIRE_T_RRSIG && r->type != WIRE_T_NSEC && (!other || first < other))
            other = first; /* RFC 4035 §2.5: RRSIG and NSEC are all a CNAME may have beside it */
        if (r->type == WIRE_T_NS)
            ns = first;
        if (r->type == WIRE_T_DNAME)
            dname = first;
    }
    if (cname && other) {
        /* blame whichever of the two came later in the file: the earlier one was legal when
         * it was written */
        const struct brr *late = cname > other ? cname : other;
        const struct brr *early = cname > other ? other : cname;
        where(b, late, w1, sizeof(w1));
        where(b, early, w2, sizeof(w2));
        return fail_msg(f, TERN_ECNAME, "%s: CNAME and other data at %s (type %u, see also %s)", w1,
                        NAME(), late == cname ? early->type : late->type, w2);
    }
    /* a node stores its RRset count in one byte: 255 types at one name is already absurd */
    if (nsets > UINT8_MAX) {
        where(b, run_first(b, f, &f->runs[b->nm[id].first]), w1, sizeof(w1));
        return fail_msg(f, TERN_ELIMIT, "%s: more than %u record types at one name", w1, UINT8_MAX);
    }
    const uint8_t *lc = b->names + b->nm[id].off;
    if (ns && lc[0] == 1 && lc[1] == '*') {
        /* RFC 4592 §4.2: a wildcard delegation would be answered as data by some servers and as
         * a referral by others; tern refuses it, so the zone means one thing everywhere */
        where(b, ns, w1, sizeof(w1));
        return fail_msg(f, TERN_EINVAL,
                        "%s: NS records at the wildcard %s: a wildcard cannot be a delegation "
                        "(RFC 4592 section 4.2)",
                        w1, NAME());
    }
    if (ns && dname && id != 0) {
        const struct brr *late = ns > dname ? ns : dname;
        where(b, late, w1, sizeof(w1));
        where(b, late == ns ? dname : ns, w2, sizeof(w2));
        return fail_msg(f, TERN_EINVAL,
                        "%s: DNAME and NS at %s (see also %s): only a zone apex may have both "
                        "(RFC 6672 section 2.3)",
                        w1, NAME(), w2);
    }
    return 0;
}

/* Group the records by owner (a stable counting sort on the name id), then by type; measure
 * and check each RRset and each name. */
static int group_runs(struct fctx *f)
{
    zone_builder_t *b = f->b;
    size_t nrec = b->rr_count ? b->rr_count : 1;
    uint32_t *count = calloc((size_t)b->nm_count + 1, sizeof(*count));
    f->ord = malloc(nrec * sizeof(*f->ord));
    f->runs = malloc(nrec * sizeof(*f->runs));
    f->run_next = malloc(nrec * sizeof(*f->run_next));
    int rc = 0;
    if (!f->ord || !count || !f->runs || !f->run_next) {
        rc = nomem(f);
        goto out;
    }
    for (size_t i = 0; i < b->rr_count; i++)
        count[b->rr[i].name + 1]++;
    for (uint32_t i = 1; i <= b->nm_count; i++)
        count[i] += count[i - 1];
    for (size_t i = 0; i < b->rr_count; i++)
        f->ord[count[b->rr[i].name]++] = (uint32_t)i;
    /* count[id] is now the end of id's group; the start is the previous end */

    size_t pos = 0;
    for (uint32_t id = 0; id < b->nm_count && rc == 0; id++) {
        size_t end = count[id];
        if (end - pos > 1)
            qsort_r(f->ord + pos, end - pos, sizeof(*f->ord), cmp_type_seq, b);
        uint32_t prev_run = NO_ID;
        while (pos < end && rc == 0) {
            uint16_t type = b->rr[f->ord[pos]].type;
            size_t s = pos;
            while (pos < end && b->rr[f->ord[pos]].type == type)
                pos++;
            struct brun *r = &f->runs[f->run_count];
            *r = (struct brun){.start = (uint32_t)s, .n = (uint32_t)(pos - s), .type = type};
            if ((rc = measure_run(f, id, r)) < 0 || (rc = check_run(f, id, r)) < 0)
                break;
            f->run_next[f->run_count] = NO_ID;
            if (prev_run == NO_ID)
                b->nm[id].first = (uint32_t)f->run_count;
            else
                f->run_next[prev_run] = (uint32_t)f->run_count;
            prev_run = (uint32_t)f->run_count;
            f->run_count++;
        }
        if (rc == 0)
            rc = check_name(f, id);
    }
out:
    free(count);
    return rc;
}

/* The run of type at name id, or NULL. */
static const struct brun *name_run(const struct fctx *f, uint32_t id, uint16_t type)
{
    for (uint32_t ri = f->b->nm[id].first; ri != NO_ID; ri = f->run_next[ri])
        if (f->runs[ri].type == type)
            return &f->runs[ri];
    return NULL;
}

/* The apex gets name id 0 whatever the order of the records, so later passes can test
 * "id == 0". TERN_ENOSOA when nothing was added at the apex at all. */
static int apex_first(struct fctx *f)
{
    zone_builder_t *b = f->b;
    uint32_t apex_id = name_find(b, b->apex, b->apex_len, dname_hash(b->apex));
    if (apex_id == NO_ID)
        return fail_msg(f, TERN_ENOSOA, "%s: no SOA record at the apex of zone %s", b->source,
                        f->zname);
    if (apex_id == 0)
        return 0;
    /* swap ids 0 and apex_id everywhere: names, records and the interning table */
    struct bname t = b->nm[0];
    b->nm[0] = b->nm[apex_id];
    b->nm[apex_id] = t;
    for (size_t i = 0; i < b->rr_count; i++) {
        if (b->rr[i].name == 0)
            b->rr[i].name = apex_id;
        else if (b->rr[i].name == apex_id)
            b->rr[i].name = 0;
    }
    for (uint32_t i = 0; i <= b->nm_mask; i++) {
        if (b->nm_slots[i].id == 0)
            b->nm_slots[i].id = apex_id;
        else if (b->nm_slots[i].id == apex_id)
            b->nm_slots[i].id = 0;
    }
    return 0;
}

/* The apex has exactly one SOA (check_run()) and an NS RRset. */
static int check_apex(struct fctx *f)
{
    if (!name_run(f, 0, WIRE_T_SOA))
        return fail_msg(f, TERN_ENOSOA, "%s: no SOA record at the apex of zone %s", f->b->source,
                        f->zname);
    if (!name_run(f, 0, WIRE_T_NS))
        return fail_msg(f, TERN_ENONS, "%s: no NS record at the apex of zone %s", f->b->source,
                        f->zname);
    return 0;
}

/* Every name's ancestors down to the apex become names too (empty non-terminals). */
static int add_ents(struct fctx *f)
{
    zone_builder_t *b = f->b;
    for (uint32_t id = 0; id < b->nm_count; id++) {
        struct bname *n = &b->nm[id];
        if (n->labels <= b->apex_labels)
            continue;
        const uint8_t *lc = b->names + n->off;
        size_t poff = n->off + 1u + lc[0];
        size_t plen = n->len - 1u - lc[0];
        const uint8_t *p = b->names + poff;
        uint32_t ph = dname_hash(p);
        uint32_t pid = name_find(b, p, plen, ph);
        if (pid == NO_ID && name_add(b, p, plen, ph, poff, &pid) < 0)
            return nomem(f);
        b->nm[id].parent = pid; /* n may have moved with the realloc in name_add */
    }
    return 0;
}

/* Name ids by label count (a counting sort): every parent comes before its children. */
static int order_by_labels(struct fctx *f)
{
    zone_builder_t *b = f->b;
    uint32_t lcount[DNAME_MAXLABELS + 1] = {0};
    f->bylabel = malloc((b->nm_count ? b->nm_count : 1) * sizeof(*f->bylabel));
    if (!f->bylabel)
        return nomem(f);
    for (uint32_t id = 0; id < b->nm_count; id++)
        lcount[b->nm[id].labels + 1]++;
    for (unsigned i = 1; i <= DNAME_MAXLABELS; i++)
        lcount[i] += lcount[i - 1];
    for (uint32_t id = 0; id < b->nm_count; id++)
        f->bylabel[lcount[b->nm[id].labels]++] = id;
    return 0;
}

/* RFC 6672 §2.4: a DNAME owner may have no descendants — they would never be answered (the
 * DNAME rewrites every name below it), like data below a zone cut. Refused with the place of the
 * first record below and of the DNAME. */
static int check_dname_occlusion(struct fctx *f)
{
    zone_builder_t *b = f->b;
    uint32_t *above = malloc((b->nm_count ? b->nm_count : 1) * sizeof(*above));
    if (!above)
        return nomem(f);
    int rc = 0;
    for (size_t k = 0; k < b->nm_count && rc == 0; k++) {
        uint32_t id = f->bylabel[k];
        above[id] = NO_ID;
        if (id == 0)
            continue;
        uint32_t p = b->nm[id].parent;
        above[id] = name_run(f, p, WIRE_T_DNAME) ? p : above[p];
        if (above[id] == NO_ID || b->nm[id].first == NO_ID)
            continue; /* an empty non-terminal: one of its descendants is reported */
        char w1[600], w2[600], nbuf[DNAME_MAXLEN * 4 + 1], dbuf[DNAME_MAXLEN * 4 + 1];
        where(b, run_first(b, f, &f->runs[b->nm[id].first]), w1, sizeof(w1));
        where(b, run_first(b, f, name_run(f, above[id], WIRE_T_DNAME)), w2, sizeof(w2));
        name_str(b, id, nbuf, sizeof(nbuf));
        name_str(b, above[id], dbuf, sizeof(dbuf));
        rc = fail_msg(f, TERN_EINVAL,
                      "%s: %s is below the DNAME at %s (%s) and would never be answered (RFC "
                      "6672 section 2.4)",
                      w1, nbuf, dbuf, w2);
    }
    free(above);
    return rc;
}

/* Steering policies onto their runs, in the order set (the last one for an RRset wins). */
static int attach_policies(struct fctx *f)
{
    zone_builder_t *b = f->b;
    f->run_pol = calloc(f->run_count ? f->run_count : 1, sizeof(*f->run_pol));
    if (!f->run_pol)
        return nomem(f);
    for (size_t i = 0; i < b->pol_count; i++) {
        const struct bpol *p = &b->pol[i];
        const uint8_t *pn = b->polnames + p->owner;
        uint32_t id = name_find(b, pn, p->len, dname_hash(pn));
        for (uint32_t ri = id == NO_ID ? NO_ID : b->nm[id].first; ri != NO_ID; ri = f->run_next[ri])
            if (f->runs[ri].type == p->type)
                f->run_pol[ri] = p->p;
    }
    return 0;
}

/* Each kept A/AAAA record's health endpoint: the one given with its geo metadata, else the
 * hook's (checks by address). Runs with a checked record are steered even without a policy. */
static int attach_health(struct fctx *f)
{
    zone_builder_t *b = f->b;
    if (b->eps_count == 0 && !b->health_fn)
        return 0;
    f->rr_health = calloc(b->rr_count ? b->rr_count : 1, sizeof(*f->rr_health));
    f->run_health = calloc(f->run_count ? f->run_count : 1, sizeof(*f->run_health));
    if (!f->rr_health || !f->run_health)
        return nomem(f);
    for (size_t ri = 0; ri < f->run_count; ri++) {
        const struct brun *r = &f->runs[ri];
        if (r->type != WIRE_T_A && r->type != WIRE_T_AAAA)
            continue;
        for (uint32_t k = 0; k < r->n; k++) {
            uint32_t idx = f->ord[r->start + k];
            const struct brr *x = &b->rr[idx];
            if (x->dup)
                continue;
            health_ep_t *ep = x->meta ? b->meta[x->meta - 1].health : NULL;
            if (!ep && b->health_fn) {
                ep = b->health_fn(b->health_ctx, b->names + b->nm[x->name].off, x->type,
                                  b->rdata + x->rdoff);
                if (ep && keep_ep(b, ep) < 0) {
                    health_ep_release(ep);
                    return nomem(f);
                }
            }
            if (ep) {
                f->rr_health[idx] = ep;
                f->run_health[ri] = true;
                f->nhealth++;
            }
        }
    }
    return 0;
}

static bool steered(const zone_geo_policy_t *p)
{
    return p->filter || p->count || p->order;
}

/* A run that gets a zone_geo_t: a steering policy, or a health-checked record. */
static bool run_steered(const struct fctx *f, size_t ri)
{
    return steered(&f->run_pol[ri]) || (f->run_health && f->run_health[ri]);
}

/* The size of every array of the zone. */
static int measure(struct fctx *f)
{
    zone_builder_t *b = f->b;
    f->nnodes = b->nm_count;
    for (size_t i = 0; i < f->run_count; i++) {
        const struct brun *r = &f->runs[i];
        f->nrr += r->kept;
        f->rdbytes += r->bytes;
        if (zone_type_has_targets(r->type))
            f->ntargets += r->kept;
        if (!run_steered(f, i))
            continue;
        f->ngeo++;
        f->ngeo_rr += r->kept;
        for (uint32_t k = 0; k < r->n; k++) {
            const struct brr *x = &b->rr[f->ord[r->start + k]];
            if (!x->dup && x->meta) {
                f->ngeo_cc += b->meta[x->meta - 1].ncc;
                f->ngeo_asn += b->meta[x->meta - 1].nasn;
            }
        }
    }
    f->slots = 2;
    while (f->slots < f->nnodes + f->nnodes / 2) /* load factor <= 2/3 */
        f->slots *= 2;
    if (f->slots - 1 > UINT32_MAX)
        return fail_msg(f, TERN_ELIMIT, "zone %s: too many names", f->zname);
    return 0;
}

static size_t parts_size(const size_t *parts, size_t n)
{
    size_t need = 0;
    for (size_t i = 0; i < n; i++)
        need += ((parts[i] ? parts[i] : 1) + 15) & ~(size_t)15; /* arena_alloc(0) takes 16 */
    return need;
}

/* The zone's arrays in one arena, the bytes they point into in another, each one chunk of the
 * exact size. */
static int allocate(struct fctx *f)
{
    zone_builder_t *b = f->b;
    f->npages = (f->nnodes + ZONE_NODE_PAGE - 1) / ZONE_NODE_PAGE;
    const size_t arrays[] = {sizeof(zone_t),
                             f->npages * sizeof(zone_node_t *),
                             f->slots * sizeof(zone_slot_t),
                             f->ntargets * sizeof(uint32_t),
                             f->ngeo * sizeof(zone_geo_t),
                             f->nhealth * sizeof(health_ep_t *),
                             f->nnodes * sizeof(uint32_t),
                             sizeof(zone_data_t *)};
    const size_t data[] = {sizeof(zone_data_t),
                           (f->run_count + 1) * sizeof(zone_rrset_t), /* +1: neg_soa */
                           b->names_len,
                           f->rdbytes,
                           strlen(b->source) + 1,
                           b->domain_id_len + 1,
                           f->ngeo_rr * sizeof(zone_geo_rr_t),
                           f->ngeo_cc * sizeof(uint16_t),
                           f->ngeo_asn * sizeof(uint32_t)};
    f->arena = arena_create();
    f->darena = arena_create();
    if (!f->arena || !f->darena ||
        arena_reserve(f->arena, parts_size(arrays, TERN_ARRAY_SIZE(arrays))) < 0 ||
        arena_reserve(f->darena, parts_size(data, TERN_ARRAY_SIZE(data))) < 0)
        return nomem(f);
    arena_t *a = f->arena, *d = f->darena;
    f->z = arena_calloc(a, 1, sizeof(*f->z));
    f->pages = arena_calloc(a, f->npages ? f->npages : 1, sizeof(*f->pages));
    f->slot = arena_calloc(a, f->slots, sizeof(*f->slot));
    f->sets = arena_calloc(d, f->run_count + 1, sizeof(*f->sets));
    f->targets = arena_calloc(a, f->ntargets, sizeof(*f->targets));
    f->geo = arena_calloc(a, f->ngeo, sizeof(*f->geo));
    f->health = arena_calloc(a, f->nhealth, sizeof(*f->health));
    f->kids = arena_calloc(a, f->nnodes, sizeof(*f->kids));
    zone_data_t **dl = arena_calloc(a, 1, sizeof(*dl));
    zone_data_t *zd = arena_calloc(d, 1, sizeof(*zd));
    f->names = arena_alloc(d, b->names_len); /* filled by release_runs() */
    f->rd = arena_alloc(d, f->rdbytes);
    char *source = arena_memdup(d, b->source, strlen(b->source) + 1);
    char *domain_id = arena_alloc(d, b->domain_id_len + 1);
    if (domain_id && b->domain_id_len)
        memcpy(domain_id, b->domain_id, b->domain_id_len);
    f->geo_rr = arena_calloc(d, f->ngeo_rr, sizeof(*f->geo_rr));
    f->geo_cc = arena_calloc(d, f->ngeo_cc, sizeof(*f->geo_cc));
    f->geo_asn = arena_calloc(d, f->ngeo_asn, sizeof(*f->geo_asn));
    f->tnames = malloc((f->ntargets ? f->ntargets : 1) * sizeof(*f->tnames));
    for (size_t i = 0; f->pages && i < f->npages; i++) {
        size_t left = f->nnodes - i * ZONE_NODE_PAGE;
        if (!(f->pages[i] =
                  zone_node_page_new(left < ZONE_NODE_PAGE ? (uint32_t)left : ZONE_NODE_PAGE)))
            return nomem(f);
    }
    if (!f->z || !f->pages || !f->slot || !f->names || !f->sets || !f->rd || !f->targets ||
        !source || !domain_id || !f->tnames || !f->geo || !f->geo_rr || !f->geo_cc || !f->geo_asn ||
        !f->health || !f->kids || !dl || !zd)
        return nomem(f);
    zone_t *z = f->z;
    z->arena = a;
    zd->refs = 1;
    zd->arena = d;
    f->darena = NULL; /* the zone owns it now */
    dl[0] = zd;
    z->data = dl;
    z->data_count = 1;
    z->kids = f->kids;
    z->refs = 1;
    z->source = source;
    z->domain_id = domain_id;
    z->domain_id_len = (uint16_t)b->domain_id_len;
    z->node_slots = f->slot;
    z->node_pages = f->pages;
    z->node_page_count = (uint32_t)f->npages;
    f->pages_given = true; /* the zone owns them now (zone_free()) */
    z->rrsets = f->sets;
    z->rrset_count = (uint32_t)f->run_count + 1; /* + neg_soa */
    z->targets = f->targets;
    z->target_count = (uint32_t)f->ntargets;
    z->node_mask = (uint32_t)(f->slots - 1);
    z->geo = f->geo;
    z->geo_count = (uint32_t)f->ngeo;
    return 0;
}

/* Nodes and the name index. */
/* Node id of the zone being filled (zone_node_at(), writable). */
#define NODE(f, id) (&(f)->pages[(id) >> ZONE_NODE_SHIFT][(id) & (ZONE_NODE_PAGE - 1)])

static void fill_nodes(struct fctx *f)
{
    zone_builder_t *b = f->b;
    unsigned max_labels = 0;
    for (uint32_t id = 0; id < f->nnodes; id++) {
        const struct bname *bn = &b->nm[id];
        zone_node_t *n = NODE(f, id);
        *n = (zone_node_t){0}; /* the page's first touch (zone_node_page_new()) */
        n->name = f->names + bn->off;
        n->name_len = bn->len;
        n->labels = bn->labels;
        if (id == 0)
            n->flags |= ZONE_NODE_APEX;
        if (n->name[0] == 1 && n->name[1] == '*')
            n->flags |= ZONE_NODE_WILD;
        if (bn->nsets == 0)
            n->flags |= ZONE_NODE_ENT;
        n->flags |= bn->nflags;
        n->rrsets = bn->nsets ? f->sets + bn->first : NULL;
        n->nrrsets = bn->nsets;
        if (bn->labels > max_labels)
            max_labels = bn->labels;
        uint32_t i = bn->hash & f->z->node_mask;
        while (f->slot[i].node)
            i = (i + 1) & f->z->node_mask;
        f->slot[i] = (zone_slot_t){.hash = bn->hash, .node = id + 1};
    }
    f->z->max_labels = (uint8_t)max_labels;
}

/* Copy one kept RR's geo metadata to the zone. */
static void fill_geo_rr(struct fctx *f, const struct brr *x, zone_geo_rr_t *gr, size_t *ccpos,
                        size_t *asnpos)
{
    const zone_builder_t *b = f->b;
    if (!x->meta)
        return;
    const struct bmeta *m = &b->meta[x->meta - 1];
    gr->weight = m->weight;
    gr->has_loc = m->has_loc;
    memcpy(gr->loc, m->loc, sizeof(gr->loc));
    gr->ncountries = m->ncc;
    gr->nasns = m->nasn;
    gr->countries = f->geo_cc + *ccpos;
    gr->asns = f->geo_asn + *asnpos;
    if (m->ncc)
        memcpy(f->geo_cc + *ccpos, b->ccs + m->cc_off, m->ncc * sizeof(*f->geo_cc));
    if (m->nasn)
        memcpy(f->geo_asn + *asnpos, b->asns + m->asn_off, m->nasn * sizeof(*f->geo_asn));
    *ccpos += m->ncc;
    *asnpos += m->nasn;
}

/* The zone's RDATA, RRset after RRset (runs are in type order per owner, RRs in file order per
 * run), with the target names and the steering of each RR: everything that needs the builder's
 * records, so that they can go before the rest of the zone is written. */
static void fill_rdata(struct fctx *f)
{
    zone_builder_t *b = f->b;
    size_t rdpos = 0, tpos = 0, gpos = 0, grpos = 0, gcpos = 0, gapos = 0, hpos = 0;
    for (uint32_t id = 0; id < f->nnodes; id++) {
        for (uint32_t ri = b->nm[id].first; ri != NO_ID; ri = f->run_next[ri]) {
            const struct brun *r = &f->runs[ri];
            size_t start = rdpos;
            bool tg = zone_type_has_targets(r->type);
            zone_geo_t *g = NULL;
            if (!tg && run_steered(f, ri)) {
                g = &f->geo[gpos++];
                g->policy = f->run_pol[ri];
                g->health = f->run_health && f->run_health[ri];
                g->count = (uint16_t)r->kept;
                g->rr = f->geo_rr + grpos;
            }
            for (uint32_t i = 0; i < r->n; i++) {
                const struct brr *x = &b->rr[f->ord[r->start + i]];
                if (x->dup)
                    continue;
                if (g) {
                    zone_geo_rr_t *gr = &f->geo_rr[grpos++];
                    gr->off = (uint32_t)(rdpos - start);
                    fill_geo_rr(f, x, gr, &gcpos, &gapos);
                    health_ep_t *ep = f->rr_health ? f->rr_health[f->ord[r->start + i]] : NULL;
                    gr->health = ep;
                    if (ep)
                        f->health[hpos++] = ep;
                }
                f->rd[rdpos] = (uint8_t)(x->rdlen >> 8);
                f->rd[rdpos + 1] = (uint8_t)x->rdlen;
                if (x->rdlen)
                    memcpy(f->rd + rdpos + 2, b->rdata + x->rdoff, x->rdlen);
                if (tg)
                    f->tnames[tpos++] = f->rd + rdpos + 2 + zone_type_target_off(r->type);
                rdpos += 2u + x->rdlen;
            }
        }
    }
}

/* The RRsets, in the order fill_rdata() wrote their RDATA; each name's are consecutive in
 * sets[], so the node keeps a count, not links (fill_nodes() reads them from the name). */
static void fill_rrsets(struct fctx *f)
{
    zone_builder_t *b = f->b;
    zone_t *z = f->z;
    size_t rdpos = 0, tpos = 0, spos = 0, gpos = 0;
    for (uint32_t id = 0; id < f->nnodes; id++) {
        struct bname *bn = &b->nm[id];
        unsigned nsets = 0, flags = 0;
        uint32_t first = (uint32_t)spos;
        for (uint32_t ri = bn->first; ri != NO_ID; ri = f->run_next[ri]) {
            const struct brun *r = &f->runs[ri];
            zone_rrset_t *s = &f->sets[spos++];
            s->type = r->type;
            s->count = (uint16_t)r->kept;
            s->ttl = r->ttl;
            s->rdata_len = r->bytes;
            s->rdata = f->rd + rdpos;
            rdpos += r->bytes;
            if (zone_type_has_targets(r->type)) {
                s->ext.targets = (uint32_t)tpos + 1;
                tpos += r->kept;
            } else if (run_steered(f, ri)) {
                s->ext.geo = (uint32_t)++gpos; /* 1 + index, as fill_rdata() numbered them */
            }
            nsets++;
            if (r->type == WIRE_T_NS && id != 0)
                flags |= ZONE_NODE_DELEG;
            if (r->type == WIRE_T_DNAME)
                flags |= ZONE_NODE_DNAME;
            if (id == 0 && r->type == WIRE_T_SOA)
                z->soa = s;
            if (id == 0 && r->type == WIRE_T_NS)
                z->apex_ns = s;
            if (r->type == WIRE_T_ANAME)
                z->aname_count++;
        }
        bn->first = first;
        bn->nsets = (uint8_t)nsets;
        bn->nflags = (uint8_t)flags;
    }
}

/* NS/MX/SRV targets to nodes, now that every node is in the index. */
static void resolve_targets(struct fctx *f)
{
    for (size_t i = 0; i < f->ntargets; i++) {
        uint8_t lc[DNAME_MAXLEN];
        size_t len = dname_lower(lc, f->tnames[i]);
        f->targets[i] = zone_find_index(f->z, lc, len, dname_hash(lc));
    }
}

/* Wildcard pointers, and cuts parents before children. The cut recorded is the topmost
 * delegation on the path from the apex: a delegation below another one is occluded (RFC 1034
 * §4.3.2 stops at the first cut going down), so for nested NS sets every node under the outer
 * cut points at the outer one. */
static void link_nodes(struct fctx *f)
{
    const zone_builder_t *b = f->b;
    /* every "*.<name>" has its parent as a node (ENTs were added) */
    for (uint32_t id = 0; id < f->nnodes; id++) {
        if (b->nm[id].parent != NO_ID)
            f->kids[b->nm[id].parent]++;
        if ((NODE(f, id)->flags & ZONE_NODE_WILD) && b->nm[id].parent != NO_ID)
            NODE(f, b->nm[id].parent)->wildcard = id + 1;
    }
    for (size_t k = 0; k < f->nnodes; k++) {
        uint32_t id = f->bylabel[k];
        zone_node_t *n = NODE(f, id);
        if (id == 0)
            continue;
        uint32_t pc = NODE(f, b->nm[id].parent)->cut;
        n->cut = pc ? pc : (n->flags & ZONE_NODE_DELEG) ? id + 1 : 0;
        if (!pc && (n->flags & ZONE_NODE_DELEG))
            n->flags |= ZONE_NODE_CUT;
    }
}

static uint32_t rd_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The zone's own fields: apex, counts, serial and the negative-answer SOA. */
static void fill_zone(struct fctx *f)
{
    zone_t *z = f->z;
    const zone_node_t *apex = NODE(f, 0);
    z->apex_node = apex;
    z->apex = apex->name;
    z->hash = f->b->nm[0].hash;
    z->apex_len = apex->name_len;
    z->apex_labels = apex->labels;
    z->node_count = f->nnodes;
    z->rr_count = f->nrr;
    /* SOA RDATA: MNAME RNAME SERIAL REFRESH RETRY EXPIRE MINIMUM (shape checked in add) */
    const uint8_t *s = z->soa->rdata + 2;
    size_t l = z->soa->rdata_len - 2;
    z->serial = rd_u32(s + l - 20);
    uint32_t minimum = rd_u32(s + l - 4);
    zone_rrset_t *neg = &f->sets[f->run_count];
    *neg = *z->soa;
    neg->ttl = minimum < z->soa->ttl ? minimum : z->soa->ttl; /* RFC 2308 §3 */
    z->neg_soa = neg;
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (health_ep_t *const *)a, y = (uintptr_t) * (health_ep_t *const *)b;
    return x < y ? -1 : x > y;
}

/* The zone's endpoints, each once, each with a reference of the zone's own. */
static void fill_health(struct fctx *f)
{
    size_t n = 0;
    qsort(f->health, f->nhealth, sizeof(*f->health), cmp_ptr);
    for (size_t i = 0; i < f->nhealth; i++)
        if (i == 0 || f->health[i] != f->health[i - 1])
            f->health[n++] = f->health[i];
    for (size_t i = 0; i < n; i++)
        health_ep_retain(f->health[i]);
    f->z->health = f->health;
    f->z->health_count = (uint32_t)n;
}

/* Every name is interned, every policy attached: the builder's name index is not needed any
 * more, and freeing it before the zone is allocated lowers the peak (16 MiB for a million names).
 * Always 0. */
static int drop_index(zone_builder_t *b)
{
    free(b->nm_slots);
    b->nm_slots = NULL;
    b->nm_mask = 0;
    return 0;
}

/* The builder's records and RDATA, once fill_rdata() has copied what the zone keeps of them:
 * handed back to the kernel now (not at the allocator's leisure), so that the rest of the zone
 * is written into the room they leave. With the zone's pages touched only as they are filled
 * (arena_calloc()), loading the 1,000,000-name zone peaks at 198 MiB instead of 292
 * (the zone itself is 128 MiB). */
static void release_records(struct fctx *f)
{
    zone_builder_t *b = f->b;
    free(b->rr);
    b->rr = NULL;
    b->rr_count = b->rr_cap = 0;
    free(b->rdata);
    b->rdata = NULL;
    b->rdata_len = b->rdata_cap = 0;
    free(f->ord);
    f->ord = NULL;
    free(f->rr_health);
    f->rr_health = NULL;
    mem_arena_purge(mem_thread_arena());
}

/* The runs, once fill_rrsets() has made them RRsets; then the owner names go into the zone and
 * the builder's copy goes. */
static void release_runs(struct fctx *f)
{
    zone_builder_t *b = f->b;
    free(f->runs);
    f->runs = NULL;
    free(f->run_next);
    f->run_next = NULL;
    free(f->run_pol);
    f->run_pol = NULL;
    free(f->run_health);
    f->run_health = NULL;
    memcpy(f->names, b->names, b->names_len);
    free(b->names);
    b->names = NULL;
    b->names_len = b->names_cap = 0;
    mem_arena_purge(mem_thread_arena());
}

static void fctx_free(struct fctx *f)
{
    for (size_t i = 0; f->pages && !f->pages_given && i < f->npages; i++)
        if (f->pages[i])
            zone_node_page_release(f->pages[i]);
    free(f->rr_health);
    free(f->run_health);
    free(f->run_pol);
    free(f->tnames);
    free(f->bylabel);
    free(f->ord);
    free(f->runs);
    free(f->run_next);
}

int zone_builder_finish(zone_builder_t *b, zone_t **out, char *err, size_t errlen)
{
    struct fctx f = {.b = b, .err = err, .errlen = errlen};
    int rc = 0;
    (void)dname_to_str(b->apex, f.zname, sizeof(f.zname));
    *out = NULL;
    if (errlen)
        err[0] = 0;
    /* validate, then complete the names, then build */
    if (b->dnssec && (rc = add_dnskeys(b)) < 0)
        (void)fail_msg(&f, rc, "zone %s: DNSKEY: %s", f.zname, b->err);
    if (rc < 0 || (rc = apex_first(&f)) < 0 || (rc = group_runs(&f)) < 0 ||
        (rc = check_apex(&f)) < 0 || (rc = add_ents(&f)) < 0 || (rc = order_by_labels(&f)) < 0 ||
        (rc = check_dname_occlusion(&f)) < 0 || (rc = attach_policies(&f)) < 0 ||
        (rc = attach_health(&f)) < 0 || (rc = measure(&f)) < 0 || (rc = drop_index(b)) < 0 ||
        (rc = allocate(&f)) < 0) {
        fctx_free(&f);
        arena_destroy(f.arena); /* allocate() hands the data arena to the zone only on success */
        arena_destroy(f.darena);
        zone_builder_free(b);
        return rc;
    }
    fill_rdata(&f);
    release_records(&f);
    fill_rrsets(&f);
    release_runs(&f);
    fill_nodes(&f);
    resolve_targets(&f);
    link_nodes(&f);
    fill_zone(&f);
    fill_health(&f);
    f.z->built_bytes = zone_footprint(f.z);
    fctx_free(&f);
    zone_builder_free(b);
    *out = f.z;
    return 0;
}
