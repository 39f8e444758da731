/*
 * xfr_in.c — see xfr_in.h. Two parts: the message reader (bounds-checked, decompressing names
 * once into a scratch record) and the transfer's state machine (one step per answer RR). An
 * IXFR's deltas go into a zone_delta_ixfr_t (zone/zone_delta.h keeps them, in memory
 * proportional to the deltas), and finish() patches `have` with the zone_delta_t it makes. The
 * zone writer is at the end.
 */
#include "tern/xfr/xfr_in.h"

#include <fcntl.h>
#include <ldns/ldns.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/common/file.h"
#include "tern/common/grow.h"
#include "tern/wire/dname.h"
#include "tern/wire/parse.h"
#include "tern/wire/rdata.h"
#include "tern/wire/rr.h"
#include "tern/xfr/journal.h" /* RFC 1982 serial arithmetic */
#include "tern/zone/zone_builder.h"
#include "tern/zone/zone_delta.h"
#include "tern/zone/zone_patch.h"

/* Decompressed RDATA: the layouts with names (wire/rdata.h) grow by at most two names of 255
 * bytes; everything else is copied and is at most 65535 bytes. */
#define RDATA_CAP (UINT16_MAX + 2 * DNAME_MAXLEN)

/* The largest SOA RDATA: two names and the five 32-bit fields. */
#define SOA_RDATA_MAX (2 * DNAME_MAXLEN + 20)

/*
 * What a transfer costs in memory, counted against max_bytes as it goes (xfr_in.h). A record
 * taken in costs its owner name and RDATA twice (the builder's copy, then the zone's) plus
 * RR_COST: the builder's entry for it with its arrays' growth slack, finish()'s sort and run
 * arrays, and the zone's node, RRset and hash slot. Measured with a release build: a 2M-record
 * AXFR (one A record per name, 19-byte owners) peaked at 280 MB above an idle ternd, 140 bytes
 * a record, of which 46 are the two copies: 100 covers the rest with a margin. Wire bytes alone
 * undercounted the peak 5.5 times.
 */
#define RR_COST 100

/* An IXFR that cannot be patched builds the new version whole from `have` (xfr_in_finish()): a
 * builder and a new zone beside the served one. The same 2M-record zone's footprint is 199 MB and
 * its AXFR peaked at 280 MB: 3/2 of the footprint of `have`. A patch usually costs a small part
 * of that, but may still ask for a build (zone_patch.h), so max_bytes must admit one. */
#define REBUILD_COST(footprint) ((footprint) / 2 * 3)

/* Room for a name in presentation form (every byte escaped as \DDD). */
#define NAME_STR_MAX (DNAME_MAXLEN * 4 + 1)

enum state {
    ST_START,  /* waiting for the opening SOA */
    ST_SECOND, /* IXFR: after the opening SOA; the next RR tells deltas from AXFR-style */
    ST_FULL,   /* the zone's RRs, into the builder, until the closing SOA */
    ST_DEL,    /* IXFR: a delta's RRs removed, until its new SOA */
    ST_ADD,    /* IXFR: a delta's RRs added, until the next delta's old SOA or the final SOA */
    ST_DONE,   /* complete: finish() may build */
    ST_FAILED, /* a feed failed: the transfer is abandoned */
    ST_BUILT,  /* finish() was called */
};

/* One RR of a message, names decompressed. */
struct rr {
    size_t off; /* where it starts in the message, for messages */
    uint8_t owner[DNAME_MAXLEN];
    uint16_t type, rclass;
    uint32_t ttl;
    uint16_t rdlen;
    uint8_t rdata[RDATA_CAP];
};

struct xfr_in {
    uint8_t origin[DNAME_MAXLEN]; /* lowercased */
    char origin_str[NAME_STR_MAX];
    uint16_t qtype;
    uint16_t id;
    enum state state;
    xfr_in_kind_t kind;
    const zone_t *have; /* NULL when there is none or it is unavailable */
    size_t max_bytes;
    char *source;
    size_t messages, records, bytes;
    size_t mem; /* what the records taken in will cost in memory (RR_COST) */

    uint32_t serial; /* the opening SOA's */
    uint32_t soa_ttl;
    uint16_t soa_len;
    uint8_t soa[SOA_RDATA_MAX];

    zone_builder_t *b; /* FULL: the zone as it streams in */

    unsigned delta;        /* IXFR: deltas seen (the current one's number) */
    uint32_t delta_to;     /* the current delta's new serial, once its second SOA is read */
    zone_delta_ixfr_t *dx; /* IXFR: the deltas, applied to `have` */

    char msg[1024]; /* why the current feed failed */
    struct rr rr;
};

static int fail(xfr_in_t *x, int rc, const char *fmt, ...) TERN_PRINTF(3, 4);
static int fail(xfr_in_t *x, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->msg, sizeof(x->msg), fmt, ap);
    va_end(ap);
    x->state = ST_FAILED;
    return rc;
}

/* The bytes of an RR as it would be on the wire (owner uncompressed, class IN) into w. */
static size_t rr_wire(uint8_t *w, const uint8_t *owner, uint16_t type, uint32_t ttl,
                      const uint8_t *rd, uint16_t rdlen)
{
    size_t n = dname_len(owner);
    memcpy(w, owner, n);
    const uint8_t fixed[10] = {(uint8_t)(type >> 8), (uint8_t)type,        0,
                               WIRE_CLASS_IN,        (uint8_t)(ttl >> 24), (uint8_t)(ttl >> 16),
                               (uint8_t)(ttl >> 8),  (uint8_t)ttl,         (uint8_t)(rdlen >> 8),
                               (uint8_t)rdlen};
    memcpy(w + n, fixed, 10);
    memcpy(w + n + 10, rd, rdlen);
    return n + 10 + rdlen;
}

/* "A", "ANAME", "TYPE65000": for messages. */
static const char *type_str(uint16_t type, char *buf, size_t len)
{
    if (type == WIRE_T_ANAME)
        return "ANAME";
    if (type == WIRE_T_AXFR || type == WIRE_T_IXFR) /* ldns describes no meta type */
        return type == WIRE_T_AXFR ? "AXFR" : "IXFR";
    const ldns_rr_descriptor *d = ldns_rr_descript(type);
    if (d && d->_type == type && d->_name)
        return d->_name;
    snprintf(buf, len, "TYPE%u", type);
    return buf;
}

static const char *name_str(const uint8_t *name, char *buf)
{
    (void)dname_to_str(name, buf, NAME_STR_MAX);
    return buf;
}

/* ---- reading a message ---- */

/* What was wrong with a name, and where (dname_unpack_err_text()). */
static int name_fault(xfr_in_t *x, const dname_unpack_err_t *e)
{
    char why[128];
    return fail(x, TERN_EMALF, "%s", dname_unpack_err_text(e, why, sizeof(why)));
}

/*
 * The name at m[*pos], decompressed into out (room for DNAME_MAXLEN) by dname_unpack(): its own
 * bytes end by `end`, its pointers go backwards only. *pos moves past the name's own bytes.
 * Returns the name's length, or a negative code with x->msg saying what was wrong, and where.
 */
static int read_name(xfr_in_t *x, const uint8_t *m, size_t mlen, size_t *pos, size_t end,
                     uint8_t *out)
{
    dname_unpack_err_t e;
    int n = dname_unpack(m, mlen, end, pos, out, &e);
    return n >= 0 ? n : name_fault(x, &e);
}

/* The RDATA at m[start .. start + rdlen) into r->rdata, the names of the layouts tern knows
 * decompressed (see xfr_in.h). */
static int read_rdata(xfr_in_t *x, const uint8_t *m, size_t mlen, size_t start, struct rr *r)
{
    dname_unpack_err_t e;
    int n = wire_rdata_unpack(m, mlen, start, r->rdlen, r->type, r->rdata, &e);
    if (n >= 0) {
        r->rdlen = (uint16_t)n;
        return 0;
    }
    if (e.fault != DNAME_FAULT_NONE)
        return name_fault(x, &e);
    char tb[16];
    return fail(x, TERN_EMALF, "malformed %s RDATA in the record at offset %zu",
                type_str(r->type, tb, sizeof(tb)), r->off);
}

/* The record at m[*pos] into r (RDATA only when want_rdata); *pos moves past it. */
static int read_rr(xfr_in_t *x, const uint8_t *m, size_t len, size_t *pos, bool want_rdata,
                   struct rr *r)
{
    r->off = *pos;
    int n = read_name(x, m, len, pos, len, r->owner);
    if (n < 0)
        return n;
    size_t p = *pos;
    if (len - p < 10 || len - p - 10 < tern_rd16(m + p + 8))
        return fail(x, TERN_EMALF, "truncated record at offset %zu", r->off);
    r->type = tern_rd16(m + p);
    r->rclass = tern_rd16(m + p + 2);
    r->ttl = tern_rd32(m + p + 4); /* as sent: an OPT's carries the upper RCODE bits */
    r->rdlen = tern_rd16(m + p + 8);
    *pos = p + 10 + r->rdlen;
    return want_rdata ? read_rdata(x, m, len, p + 10, r) : 0;
}

/* Count a record of owner and rdlen bytes of RDATA that the new version will hold. */
static int charge(xfr_in_t *x, const uint8_t *owner, uint16_t rdlen)
{
    x->mem += 2 * (dname_len(owner) + rdlen) + RR_COST;
    if (x->max_bytes && x->mem > x->max_bytes)
        return fail(x, TERN_ELIMIT,
                    "the zone would take more than max_bytes (%zu) in memory (%zu records so far)",
                    x->max_bytes, x->records + 1);
    return 0;
}

/* A delta removes r: from what earlier deltas added, else from `have`; else the versions have
 * diverged. */
static int delta_remove(xfr_in_t *x, const struct rr *r)
{
    char why[768];
    int rc = zone_delta_ixfr_remove(x->dx, r->owner, r->type, r->rdata, r->rdlen, why, sizeof(why));
    if (rc == TERN_ENOENT)
        return fail(x, TERN_EINVAL, "IXFR: delta %u removes %s", x->delta, why);
    return rc < 0 ? fail(x, rc, "out of memory") : 0;
}

/* A delta adds r (replacing the same record in `have`, with its TTL); new data is counted. */
static int delta_add(xfr_in_t *x, const struct rr *r)
{
    int rc = zone_delta_ixfr_add(x->dx, r->owner, r->type, r->ttl, r->rdata, r->rdlen);
    if (rc == TERN_ELIMIT)
        return fail(x, TERN_ELIMIT, "IXFR: the deltas' data passes 4 GiB");
    if (rc < 0)
        return fail(x, rc, "out of memory");
    return rc == 1 ? charge(x, r->owner, r->rdlen) : 0;
}

/* ---- the transfer, one answer RR at a time ---- */

static uint32_t soa_serial(const struct rr *r)
{
    return tern_rd32(r->rdata + r->rdlen - 20); /* read_rdata() checked the layout */
}

static bool is_apex_soa(const xfr_in_t *x, const struct rr *r)
{
    return r->type == WIRE_T_SOA && dname_equal(r->owner, x->origin);
}

/* What every answer RR must be, whatever the state: class IN, zone data, inside the zone, and an
 * SOA only at the apex (an SOA anywhere else would be mistaken for none or the end). */
static int check_rr(xfr_in_t *x, const struct rr *r)
{
    char nb[NAME_STR_MAX], tb[16];
    if (r->rclass != WIRE_CLASS_IN)
        return fail(x, TERN_EINVAL, "record %s %s of class %u (only IN)", name_str(r->owner, nb),
                    type_str(r->type, tb, sizeof(tb)), r->rclass);
    if (r->type == 0 || r->type == WIRE_T_OPT ||
        (r->type >= WIRE_T_META_MIN && r->type <= WIRE_T_META_MAX))
        return fail(x, TERN_EINVAL, "record %s of type %s is not zone data", name_str(r->owner, nb),
                    type_str(r->type, tb, sizeof(tb)));
    if (!dname_is_subdomain(r->owner, x->origin))
        return fail(x, TERN_EOUTZONE, "record outside the zone %s: %s %s", x->origin_str,
                    name_str(r->owner, nb), type_str(r->type, tb, sizeof(tb)));
    if (r->type == WIRE_T_SOA && !dname_equal(r->owner, x->origin))
        return fail(x, TERN_EINVAL, "SOA record at %s, not at the apex of %s",
                    name_str(r->owner, nb), x->origin_str);
    return 0;
}

static int full_add(xfr_in_t *x, const uint8_t *owner, uint16_t type, uint32_t ttl,
                    const uint8_t *rdata, uint16_t rdlen)
{
    int rc = charge(x, owner, rdlen);
    if (rc < 0)
        return rc;
    rc = zone_builder_add(x->b, owner, type, WIRE_CLASS_IN, ttl, rdata, rdlen, NULL, 0);
    return rc < 0 ? fail(x, rc, "%s", zone_builder_error(x->b)) : 0;
}

static int start_full(xfr_in_t *x)
{
    x->kind = XFR_IN_FULL;
    x->state = ST_FULL;
    if (!(x->b = zone_builder_new(x->origin, x->source)))
        return fail(x, TERN_ENOMEM, "out of memory");
    if (x->have)
        zone_builder_expect(x->b, x->have->rr_count); /* the new version is likely as large */
    return full_add(x, x->origin, WIRE_T_SOA, x->soa_ttl, x->soa, x->soa_len);
}

/* The opening SOA: its serial is the primary's version. last: it ends its message. */
static int on_first(xfr_in_t *x, const struct rr *r, bool last)
{
    if (!is_apex_soa(x, r))
        return fail(x, TERN_EINVAL, "first record is not the SOA of %s", x->origin_str);
    x->serial = soa_serial(r);
    x->soa_ttl = r->ttl;
    x->soa_len = r->rdlen;
    memcpy(x->soa, r->rdata, r->rdlen);
    if (x->qtype == WIRE_T_AXFR) {
        /* an equal serial is a forced retransfer; an older one would roll the zone back */
        if (x->have && xfr_serial_lt(x->serial, x->have->serial))
            return fail(x, TERN_EINVAL, "serial %u is older than the version served (%u)",
                        x->serial, x->have->serial);
        return start_full(x);
    }
    if (!xfr_serial_gt(x->serial, x->have->serial)) {
        /* RFC 1995 §4: a single SOA is "nothing newer than what you have" */
        if (last) {
            x->kind = XFR_IN_UP_TO_DATE;
            x->state = ST_DONE;
            return 0;
        }
        return fail(x, TERN_EINVAL,
                    "IXFR: serial went backwards: %u is not newer than the version served (%u)",
                    x->serial, x->have->serial);
    }
    x->state = ST_SECOND;
    return 0;
}

static int on_rr(xfr_in_t *x, const struct rr *r, bool last)
{
    int rc = check_rr(x, r);
    if (rc < 0)
        return rc;
    bool soa = r->type == WIRE_T_SOA; /* check_rr(): at the apex */
    uint32_t s = soa ? soa_serial(r) : 0;
    switch (x->state) {
    case ST_START:
        return on_first(x, r, last);
    case ST_SECOND:
        if (!soa) { /* RFC 1995 §4: an AXFR-style answer */
            if ((rc = start_full(x)) < 0)
                return rc;
            return full_add(x, r->owner, r->type, r->ttl, r->rdata, r->rdlen);
        }
        if (s != x->have->serial)
            return fail(x, TERN_EINVAL,
                        "IXFR: delta 1 starts at serial %u, not at the version served (%u)", s,
                        x->have->serial);
        x->kind = XFR_IN_INCREMENTAL;
        x->delta = 1;
        x->state = ST_DEL;
        if (!(x->dx = zone_delta_ixfr_new(x->have)))
            return fail(x, TERN_ENOMEM, "out of memory");
        return zone_delta_ixfr_begin(x->dx, s, NULL, 0) < 0 ? fail(x, TERN_EINVAL, "IXFR: bad step")
                                                            : 0;
    case ST_FULL:
        if (!soa)
            return full_add(x, r->owner, r->type, r->ttl, r->rdata, r->rdlen);
        if (s != x->serial)
            return fail(x, TERN_EINVAL, "closing SOA has serial %u, the opening one %u", s,
                        x->serial);
        x->state = ST_DONE;
        return 0;
    case ST_DEL:
        if (!soa)
            return delta_remove(x, r);
        x->delta_to = s;
        x->state = ST_ADD;
        return zone_delta_ixfr_end(x->dx, s) < 0 ? fail(x, TERN_EINVAL, "IXFR: bad step") : 0;
    case ST_ADD:
        if (!soa)
            return delta_add(x, r);
        if (s == x->serial && x->delta_to == x->serial) {
            x->state = ST_DONE; /* the final SOA */
            return 0;
        }
        if (s != x->delta_to)
            return fail(x, TERN_EINVAL,
                        "IXFR: delta %u starts at serial %u, delta %u ended at %u (the chain "
                        "must reach %u)",
                        x->delta + 1, s, x->delta, x->delta_to, x->serial);
        x->delta++;
        x->state = ST_DEL;
        return zone_delta_ixfr_begin(x->dx, s, NULL, 0) < 0 ? fail(x, TERN_EINVAL, "IXFR: bad step")
                                                            : 0;
    default:
        return fail(x, TERN_EINVAL, "records after the closing SOA");
    }
}

static const char *rcode_str(unsigned rc, char *buf, size_t len)
{
    const ldns_lookup_table *t = ldns_lookup_by_id(ldns_rcodes, (int)rc);
    if (t && t->name)
        return t->name;
    snprintf(buf, len, "%u", rc);
    return buf;
}

/* The header and the question: the answer to our query, from a primary that has the zone. */
static int check_header(xfr_in_t *x, const uint8_t *m, size_t len, size_t *pos)
{
    char b1[16], b2[16];
    if (len < WIRE_HDR_LEN)
        return fail(x, TERN_EMALF, "truncated header (%zu bytes)", len);
    uint16_t flags = tern_rd16(m + 2);
    if (tern_rd16(m) != x->id)
        return fail(x, TERN_EINVAL, "id %u, the query's was %u", tern_rd16(m), x->id);
    if (!(flags & WIRE_FLAG_QR))
        return fail(x, TERN_EINVAL, "QR not set: not a response");
    if (WIRE_OPCODE(flags) != WIRE_OP_QUERY)
        return fail(x, TERN_EINVAL, "opcode %u, not QUERY", WIRE_OPCODE(flags));
    if (WIRE_RCODE(flags) != WIRE_RC_NOERROR)
        return fail(x, TERN_EINVAL, "RCODE %s", rcode_str(WIRE_RCODE(flags), b1, sizeof(b1)));
    uint16_t qd = tern_rd16(m + 4);
    if (qd > 1)
        return fail(x, TERN_EMALF, "%u questions", qd);
    *pos = WIRE_HDR_LEN;
    if (qd == 0) /* RFC 5936 §2.2.1: the question may be left out after the first message */
        return 0;
    uint8_t name[DNAME_MAXLEN];
    char nb[NAME_STR_MAX];
    int n = read_name(x, m, len, pos, len, name);
    if (n < 0)
        return n;
    if (len - *pos < 4)
        return fail(x, TERN_EMALF, "truncated question");
    uint16_t qtype = tern_rd16(m + *pos), qclass = tern_rd16(m + *pos + 2);
    *pos += 4;
    if (!dname_equal(name, x->origin) || qtype != x->qtype || qclass != WIRE_CLASS_IN)
        return fail(x, TERN_EINVAL, "the question is %s %s class %u, not %s %s IN",
                    name_str(name, nb), type_str(qtype, b1, sizeof(b1)), qclass, x->origin_str,
                    type_str(x->qtype, b2, sizeof(b2)));
    return 0;
}

/* Authority and additional records: walked with the same checks, otherwise ignored (TSIG was
 * removed by the caller; an OPT may carry the upper bits of the RCODE). */
static int skip_rest(xfr_in_t *x, const uint8_t *m, size_t len, size_t *pos, unsigned count,
                     bool additional)
{
    for (unsigned i = 0; i < count; i++) {
        int rc = read_rr(x, m, len, pos, false, &x->rr);
        if (rc < 0)
            return rc;
        if (additional && x->rr.type == WIRE_T_OPT && x->rr.ttl >> 24) {
            char b[16];
            unsigned ext = (x->rr.ttl >> 24) << 4 | WIRE_RCODE(tern_rd16(m + 2));
            return fail(x, TERN_EINVAL, "RCODE %s", rcode_str(ext, b, sizeof(b)));
        }
    }
    return 0;
}

static int feed_msg(xfr_in_t *x, const uint8_t *m, size_t len)
{
    size_t pos;
    int rc = check_header(x, m, len, &pos);
    if (rc < 0)
        return rc;
    unsigned an = tern_rd16(m + 6), ns = tern_rd16(m + 8), ar = tern_rd16(m + 10);
    if (an == 0 && x->state == ST_START)
        return fail(x, TERN_EINVAL,
                    "no records in the answer (is the primary authoritative for "
                    "%s?)",
                    x->origin_str);
    for (unsigned i = 0; i < an; i++) {
        if (x->state == ST_DONE)
            return fail(x, TERN_EINVAL, "%u records after the closing SOA", an - i);
        if ((rc = read_rr(x, m, len, &pos, true, &x->rr)) < 0)
            return rc;
        if (x->rr.ttl > INT32_MAX) /* RFC 2181 §8 */
            x->rr.ttl = 0;
        if ((rc = on_rr(x, &x->rr, i + 1 == an)) < 0)
            return rc;
        x->records++;
    }
    if ((rc = skip_rest(x, m, len, &pos, ns, false)) < 0 ||
        (rc = skip_rest(x, m, len, &pos, ar, true)) < 0)
        return rc;
    if (pos != len)
        return fail(x, TERN_EMALF, "%zu bytes after the last record", len - pos);
    return x->state == ST_DONE ? 0 : 1;
}

/* ---- the API ---- */

xfr_in_t *xfr_in_new(const uint8_t *origin, uint16_t qtype, const zone_t *have, size_t max_bytes,
                     const char *source)
{
    if (have && (have->unavailable || !dname_equal(have->apex, origin)))
        have = NULL;
    if ((qtype != WIRE_T_AXFR && qtype != WIRE_T_IXFR) || (qtype == WIRE_T_IXFR && !have))
        return NULL;
    xfr_in_t *x = calloc(1, sizeof(*x));
    if (!x)
        return NULL;
    dname_lower(x->origin, origin);
    (void)dname_to_str(x->origin, x->origin_str, sizeof(x->origin_str));
    x->qtype = qtype;
    x->have = have;
    x->max_bytes = max_bytes;
    x->state = ST_START;
    x->kind = XFR_IN_FULL;
    if (!(x->source = strdup(source ? source : x->origin_str))) {
        free(x);
        return NULL;
    }
    return x;
}

void xfr_in_set_id(xfr_in_t *x, uint16_t id)
{
    x->id = id;
}

int xfr_in_feed(xfr_in_t *x, const uint8_t *msg, size_t len, char *err, size_t errlen)
{
    int rc;
    if (x->state == ST_DONE || x->state == ST_BUILT) {
        tern_set_err(err, errlen, "%s: message %zu after the end of the transfer", x->source,
                     x->messages + 1);
        return TERN_EINVAL;
    }
    if (x->state == ST_FAILED) {
        tern_set_err(err, errlen, "%s: the transfer already failed: %s", x->source, x->msg);
        return TERN_EINVAL;
    }
    x->messages++;
    if (x->max_bytes && len > x->max_bytes - x->bytes) {
        x->bytes += len;
        rc = fail(x, TERN_ELIMIT, "transfer larger than max_bytes (%zu)", x->max_bytes);
    } else {
        x->bytes += len;
        rc = feed_msg(x, msg, len);
    }
    if (rc < 0)
        tern_set_err(err, errlen, "%s: message %zu: %s", x->source, x->messages, x->msg);
    return rc;
}

xfr_in_kind_t xfr_in_kind(const xfr_in_t *x)
{
    return x->kind;
}

uint32_t xfr_in_serial(const xfr_in_t *x)
{
    return x->serial;
}

size_t xfr_in_messages(const xfr_in_t *x)
{
    return x->messages;
}

size_t xfr_in_records(const xfr_in_t *x)
{
    return x->records;
}

size_t xfr_in_bytes(const xfr_in_t *x)
{
    return x->bytes;
}

size_t xfr_in_memory(const xfr_in_t *x)
{
    return x->mem;
}

/* `have` with the deltas applied, built whole into a new builder (what a patch could not do). */
static int build_whole(xfr_in_t *x, zone_t **out, char *err, size_t errlen)
{
    zone_builder_t *b = zone_builder_new(x->origin, x->source);
    if (!b) {
        tern_set_err(err, errlen, "%s: out of memory", x->source);
        return TERN_ENOMEM;
    }
    int rc = zone_delta_ixfr_build(x->dx, x->soa_ttl, x->soa, x->soa_len, b);
    zone_delta_ixfr_free(x->dx); /* before finish: the builder holds everything now */
    x->dx = NULL;
    if (rc < 0) {
        tern_set_err(err, errlen, "%s", zone_builder_error(b));
        zone_builder_free(b);
        return rc;
    }
    return zone_builder_finish(b, out, err, errlen);
}

/* The deltas as one zone_delta_t, patched onto `have`; anything the patch cannot do (or a
 * partial zone the builder refuses: the whole build says why) is built whole. */
static int apply_ixfr(xfr_in_t *x, zone_t **out, char *err, size_t errlen)
{
    zone_delta_t *d = NULL;
    char why[512];
    int rc = zone_delta_ixfr_finish(x->dx, x->soa_ttl, x->soa, x->soa_len, x->source, &d, why,
                                    sizeof(why));
    if (rc == TERN_ENOMEM) {
        tern_set_err(err, errlen, "%s: out of memory", x->source);
        return rc;
    }
    if (rc == 0) {
        rc = zone_patch(x->have, d, out, why, sizeof(why));
        /* the version comes from this transfer, as a built one would say: the name lives in
         * fresh's data blob, which the patched version holds */
        if (rc == 0)
            (*out)->source = zone_delta_fresh(d)->source;
        zone_delta_release(d);
        if (rc == TERN_ENOMEM)
            tern_set_err(err, errlen, "%s: out of memory", x->source);
        if (rc <= 0)
            return rc;
    }
    return build_whole(x, out, err, errlen);
}

int xfr_in_finish(xfr_in_t *x, zone_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (x->state != ST_DONE || x->kind == XFR_IN_UP_TO_DATE) {
        tern_set_err(err, errlen, "%s: %s", x->source,
                     x->state == ST_BUILT  ? "the zone was built already"
                     : x->state != ST_DONE ? "the transfer is not complete"
                                           : "the zone is up to date: nothing to build");
        return TERN_EINVAL;
    }
    x->state = ST_BUILT;
    zone_builder_t *b = x->b;
    x->b = NULL;
    if (x->kind != XFR_IN_INCREMENTAL)
        return zone_builder_finish(b, out, err, errlen);
    size_t rebuild = REBUILD_COST(zone_footprint(x->have));
    if (x->max_bytes && rebuild > x->max_bytes - (x->mem < x->max_bytes ? x->mem : 0)) {
        tern_set_err(err, errlen,
                     "%s: applying the IXFR would take more than max_bytes (%zu) in memory "
                     "(rebuilding a zone of %zu MiB)",
                     x->source, x->max_bytes, zone_footprint(x->have) >> 20);
        zone_delta_ixfr_free(x->dx);
        x->dx = NULL;
        return TERN_ELIMIT;
    }
    int rc = apply_ixfr(x, out, err, errlen);
    zone_delta_ixfr_free(x->dx);
    x->dx = NULL;
    return rc;
}

void xfr_in_free(xfr_in_t *x)
{
    if (!x)
        return;
    zone_builder_free(x->b);
    zone_delta_ixfr_free(x->dx);
    free(x->source);
    free(x);
}

/* ---- the on-disk copy ---- */

/* Whether ldns reads text s back as exactly the RR in wire form w (wlen bytes): names keep their
 * case, so the exact bytes are compared, not the canonical form. */
static bool reads_back(const char *s, const uint8_t *w, size_t wlen, ldns_buffer *buf)
{
    ldns_rr *rr = NULL;
    if (ldns_rr_new_frm_str(&rr, s, 0, NULL, NULL) != LDNS_STATUS_OK)
        return false;
    ldns_buffer_clear(buf);
    bool same = ldns_rr2buffer_wire(buf, rr, LDNS_SECTION_ANSWER) == LDNS_STATUS_OK &&
                ldns_buffer_position(buf) == wlen && memcmp(ldns_buffer_begin(buf), w, wlen) == 0;
    ldns_rr_free(rr);
    return same;
}

/* One RR as a line of f: ldns's presentation form if it reads back to the same bytes, else the
 * generic form of RFC 3597 §5, which every reader takes for every type. */
static int write_rr(FILE *f, const uint8_t *owner, uint16_t type, uint32_t ttl, const uint8_t *rd,
                    uint16_t rdlen, uint8_t *w, ldns_buffer *buf)
{
    size_t wlen = rr_wire(w, owner, type, ttl, rd, rdlen), pos = 0;
    ldns_rr *rr = NULL;
    if (ldns_wire2rr(&rr, w, wlen, &pos, LDNS_SECTION_ANSWER) == LDNS_STATUS_OK) {
        char *s = ldns_rr2str_fmt(ldns_output_format_nocomments, rr);
        ldns_rr_free(rr);
        /* ldns 1.8 reads a HINFO back only without the line end it printed: check without it */
        size_t n = s ? strlen(s) : 0;
        if (n && s[n - 1] == '\n')
            s[n - 1] = '\0';
        if (s && reads_back(s, w, wlen, buf)) {
            int rc = fputs(s, f) == EOF || fputc('\n', f) == EOF ? TERN_EIO : 0;
            free(s);
            return rc;
        }
        free(s);
    }
    char nb[NAME_STR_MAX];
    fprintf(f, "%s\t%u\tIN\tTYPE%u\t\\# %u", name_str(owner, nb), ttl, type, rdlen);
    if (rdlen)
        fputc(' ', f);
    for (size_t i = 0; i < rdlen; i++)
        fprintf(f, "%02x", rd[i]);
    return fputc('\n', f) == EOF ? TERN_EIO : 0;
}

static int write_zone(FILE *f, const zone_t *z, uint16_t skip_type, uint8_t *w, ldns_buffer *buf)
{
    char nb[NAME_STR_MAX];
    fprintf(f, "; zone %s, serial %u, from %s\n", name_str(z->apex, nb), z->serial,
            z->source ? z->source : "?");
    const uint8_t *soa = z->soa->rdata;
    int rc = write_rr(f, z->apex, WIRE_T_SOA, z->soa->ttl, soa + 2, tern_rd16(soa), w, buf);
    for (size_t i = 0; i < z->node_count && rc == 0; i++) {
        const zone_node_t *n = zone_node_at(z, (uint32_t)i);
        for (unsigned j = 0; j < n->nrrsets && rc == 0; j++) {
            const zone_rrset_t *s = &n->rrsets[j];
            if ((s->type == WIRE_T_SOA && n == z->apex_node) || (skip_type && s->type == skip_type))
                continue; /* the SOA is written first */
            const uint8_t *p = s->rdata;
            for (unsigned k = 0; k < s->count && rc == 0; k++) {
                rc = write_rr(f, n->name, s->type, s->ttl, p + 2, tern_rd16(p), w, buf);
                p += 2 + tern_rd16(p);
            }
        }
    }
    return rc;
}

int xfr_zone_write_file(const zone_t *z, const char *path, char *err, size_t errlen)
{
    return xfr_zone_write_file_skip(z, path, 0, err, errlen);
}

int xfr_zone_write_file_skip(const zone_t *z, const char *path, uint16_t skip_type, char *err,
                             size_t errlen)
{
    char *tmp = NULL;
    FILE *f = NULL;
    uint8_t *w = NULL;
    ldns_buffer *buf = NULL;
    int fd = -1, rc;
    if (asprintf(&tmp, "%s.XXXXXX", path) < 0) {
        tmp = NULL;
        rc = TERN_ENOMEM;
        goto fail;
    }
    w = malloc(DNAME_MAXLEN + 10 + UINT16_MAX);
    buf = ldns_buffer_new(1024);
    if (!w || !buf) {
        rc = TERN_ENOMEM;
        goto fail;
    }
    if ((fd = mkstemp(tmp)) < 0) {
        rc = -errno;
        free(tmp);
        tmp = NULL; /* nothing to remove */
        goto fail;
    }
    /* mkstemp makes it 0600; a zone file is no secret, and operators read it */
    if (fchmod(fd, 0644) < 0 || !(f = fdopen(fd, "w"))) {
        rc = -errno;
        goto fail;
    }
    fd = -1;
    if ((rc = write_zone(f, z, skip_type, w, buf)) < 0)
        goto fail;
    errno = 0;
    if (ferror(f) || fflush(f) != 0 || fsync(fileno(f)) != 0) {
        rc = errno ? -errno : TERN_EIO;
        goto fail;
    }
    rc = fclose(f);
    f = NULL;
    if (rc != 0 || rename(tmp, path) != 0) {
        rc = -errno;
        goto fail;
    }
    free(tmp);
    tmp = NULL;
    if ((rc = tern_file_sync_dir(path)) < 0) /* the rename made durable */
        goto fail;
    free(w);
    ldns_buffer_free(buf);
    return 0;
fail:
    tern_set_err(err, errlen, "%s: cannot write the zone file: %s", path, tern_strerror(rc));
    if (f)
        fclose(f);
    if (fd >= 0)
        close(fd);
    if (tmp)
        unlink(tmp);
    free(tmp);
    free(w);
    ldns_buffer_free(buf);
    return rc;
}
