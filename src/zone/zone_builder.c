/*
 * zone_builder.c — collect one zone's records; finish() runs the passes that validate and
 * compile them.
 *
 * add() only appends: the owner is lowercased and interned (one id per distinct name), the RDATA
 * copied into one growing buffer. finish() does the work in passes over flat arrays, so a
 * million-record zone costs a counting sort, a few linear passes and one allocation per array:
 *   1. group records by owner (stable counting sort on the name id), then by type;
 *   2. per (owner, type) run: drop duplicate RDATA, take the lowest TTL, validate
 *      (SOA, CNAME, limits);
 *   3. insert every missing ancestor between a name and the apex as an empty non-terminal;
 *      (1-3: zone_builder_check.c)
 *   4. attach steering policies and health endpoints (given per RR, or found by the health hook
 *      for records checked by address) to their A/AAAA runs;
 *   5. size and allocate the zone in its own arena, fill nodes, the node hash table, the
 *      RRsets (type order, file order inside), wildcard and cut pointers, NS/MX/SRV targets.
 *      (4-5: zone_builder_render.c)
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
#include "zone_builder_int.h"

static void set_err(zone_builder_t *b, const char *fmt, ...) TERN_PRINTF(2, 3);
static void set_err(zone_builder_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err, sizeof(b->err), fmt, ap);
    va_end(ap);
}

/* "file:line" of a record, or "zone X" when it came from nowhere in particular. */
void zone_builder_where(const zone_builder_t *b, const struct brr *r, char *dst, size_t len)
{
    if (r && r->file != NO_ID)
        snprintf(dst, len, "%s:%" PRIu32, b->files[r->file], r->line);
    else
        snprintf(dst, len, "zone %s", b->source);
}

void zone_builder_name_str(const zone_builder_t *b, uint32_t id, char *dst, size_t len)
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
    free(b->grpnames);
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
int zone_builder_keep_ep(zone_builder_t *b, health_ep_t *ep)
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
uint32_t zone_builder_name_find(const zone_builder_t *b, const uint8_t *lc, size_t len,
                                uint32_t hash)
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
int zone_builder_name_add(zone_builder_t *b, const uint8_t *lc, size_t len, uint32_t hash,
                          size_t off, uint32_t *id)
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
        id = zone_builder_name_find(b, lc, len, hash);
        if (id == NO_ID) {
            int rc = zone_builder_name_add(b, lc, len, hash, NO_ID, &id);
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
    uint32_t apex = zone_builder_name_find(b, b->apex, b->apex_len, dname_hash(b->apex));
    for (size_t i = 0; i < b->rr_count && !ttl && apex != NO_ID; i++)
        if (b->rr[i].type == WIRE_T_SOA && b->rr[i].name == apex)
            ttl = b->rr[i].ttl;
    for (size_t pos = 0; pos + 4 <= b->dnskeys_len;) {
        uint16_t type = (uint16_t)(b->dnskeys[pos] << 8 | b->dnskeys[pos + 1]);
        uint16_t l = (uint16_t)(b->dnskeys[pos + 2] << 8 | b->dnskeys[pos + 3]);
        if (pos + 4u + l > b->dnskeys_len)
            return TERN_EINVAL;
        int rc = add_rr(b, b->apex, type, 1, ttl ? ttl : 3600, b->dnskeys + pos + 4, l, NULL, 0, 0);
        if (rc < 0)
            return rc;
        pos += 4u + l;
    }
    return 0;
}

bool zone_builder_has_owner(const zone_builder_t *b, const uint8_t *owner)
{
    uint8_t lc[DNAME_MAXLEN];
    size_t len = dname_lower(lc, owner);
    return zone_builder_name_find(b, lc, len, dname_hash(lc)) != NO_ID;
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
    if (meta->group && (meta->group_len == 0 || meta->group_len > 255)) {
        set_err(b, "%s: a latency group name of %zu bytes", LOC(), meta->group_len);
        return TERN_EINVAL;
    }
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
            0 ||
        tern_grow((void **)&b->grpnames, &b->grpnames_cap,
                  b->grpnames_len + (meta->group ? meta->group_len + 1 : 0), 1) < 0) {
        set_err(b, "%s: out of memory", LOC());
        return TERN_ENOMEM;
    }
    struct bmeta *m = &b->meta[b->meta_count];
    *m = (struct bmeta){.weight = meta->weight,
                        .cc_off = (uint32_t)b->cc_count,
                        .asn_off = (uint32_t)b->asn_count,
                        .nasn = (uint16_t)meta->nasns,
                        .ncc = (uint8_t)meta->ncountries,
                        .has_loc = meta->has_location,
                        .group = meta->group,
                        .grp_off = (uint32_t)b->grpnames_len,
                        .priority = meta->priority};
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
    if (meta->group) {
        memcpy(b->grpnames + b->grpnames_len, meta->group_name, meta->group_len);
        b->grpnames[b->grpnames_len + meta->group_len] = 0;
        b->grpnames_len += meta->group_len + 1;
    }
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
    if (policy->filter > ZONE_GEO_FILTER_LATENCY || policy->count > ZONE_GEO_COUNT_SINGLE ||
        policy->order > ZONE_GEO_ORDER_STICKY || policy->nmin > ZONE_GEO_TIERS_MAX ||
        policy->sticky_v4 > 32 || policy->sticky_v6 > 128 ||
        (policy->shed && policy->shed_low >= policy->shed_high)) {
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

/* ---- finish: the passes are in zone_builder_check.c and zone_builder_render.c ------------- */

int zone_builder_fail(struct fctx *f, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->err, f->errlen, fmt, ap);
    va_end(ap);
    return rc;
}

int zone_builder_nomem(struct fctx *f)
{
    return zone_builder_fail(f, TERN_ENOMEM, "zone %s: out of memory", f->zname);
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
        (void)zone_builder_fail(&f, rc, "zone %s: DNSKEY: %s", f.zname, b->err);
    if (rc < 0 || (rc = zone_builder_check(&f)) < 0 || (rc = zone_builder_render(&f)) < 0) {
        fctx_free(&f);
        arena_destroy(f.arena); /* allocate() hands the data arena to the zone only on success */
        arena_destroy(f.darena);
        zone_builder_free(b);
        return rc;
    }
    fctx_free(&f);
    zone_builder_free(b);
    *out = f.z;
    return 0;
}
