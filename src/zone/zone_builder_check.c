/*
 * zone_builder_check.c — finish(), passes 1-3: records into RRsets, validated, names completed.
 *
 *   1. the apex becomes name id 0; records are grouped by owner (a stable counting sort on the
 *      name id), then by type;
 *   2. per (owner, type) run: duplicate RDATA dropped (compared in canonical form), the lowest
 *      TTL taken, the RRset validated (SOA, CNAME, DNAME, limits); then each name's RRsets
 *      together (CNAME beside data, wildcard NS, DNAME beside NS) and the apex (SOA and NS);
 *   3. every missing ancestor between a name and the apex inserted as an empty non-terminal,
 *      names ordered parents first, and nothing left below a DNAME.
 * Each failure names file:line of the offending record (zone_builder_where()).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/wire/rdata.h"
#include "tern/wire/rr.h"
#include "zone_builder_int.h"

/* Runs of identical type at one owner up to this size are de-duplicated by comparing every pair;
 * larger ones (round-robin pools of hundreds of addresses) are sorted first so the cost stays
 * O(n log n). 16 keeps the quadratic case under ~120 short memcmp calls. */
#define DEDUP_PAIRWISE_MAX 16

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
        return zone_builder_nomem(f);
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
        zone_builder_where(b, first, w, sizeof(w));
        zone_builder_name_str(b, id, nbuf, sizeof(nbuf));
        return zone_builder_fail(f, TERN_ELIMIT, "%s: RRset %s type %u has more than %u records", w,
                                 nbuf, r->type, ZONE_BUILDER_MAX_RRSET_RRS);
    }
    if (ttl_differs) {
        zone_builder_where(b, first, w, sizeof(w));
        zone_builder_name_str(b, id, nbuf, sizeof(nbuf));
        log_warn("%s: RRset %s type %u has records with different TTLs; using the lowest, %" PRIu32
                 " (RFC 2181 section 5.2)",
                 w, nbuf, r->type, r->ttl);
    }
    return 0;
}

/* The owner's name in nbuf, made only when a message needs it (a zone of a million names checks
 * millions of RRsets and names, nearly all of them fine). */
#define NAME() (zone_builder_name_str(b, id, nbuf, sizeof(nbuf)), nbuf)

/* The rules about one RRset alone: one SOA, at the apex; one CNAME per name. */
static int check_run(struct fctx *f, uint32_t id, const struct brun *r)
{
    zone_builder_t *b = f->b;
    char w1[600], w2[600], nbuf[DNAME_MAXLEN * 4 + 1];
    if (r->type == WIRE_T_SOA && id != 0) {
        zone_builder_where(b, run_first(b, f, r), w1, sizeof(w1));
        return zone_builder_fail(f, TERN_EINVAL, "%s: SOA record %s is not at the zone apex", w1,
                                 NAME());
    }
    if (r->type == WIRE_T_SOA && r->kept > 1) {
        zone_builder_where(b, run_kept(b, f, r, 1), w1, sizeof(w1));
        return zone_builder_fail(f, TERN_EINVAL, "%s: more than one SOA record at the apex %s", w1,
                                 NAME());
    }
    if ((r->type == WIRE_T_CNAME || r->type == WIRE_T_DNAME || r->type == WIRE_T_ANAME) &&
        r->kept > 1) {
        /* RFC 6672 §2.4: like a CNAME, at most one DNAME per name; an ANAME names one target */
        zone_builder_where(b, run_kept(b, f, r, 1), w1, sizeof(w1));
        zone_builder_where(b, run_first(b, f, r), w2, sizeof(w2));
        return zone_builder_fail(f, TERN_ECNAME, "%s: second %s record at %s (first at %s)", w1,
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
        zone_builder_where(b, late, w1, sizeof(w1));
        zone_builder_where(b, early, w2, sizeof(w2));
        return zone_builder_fail(f, TERN_ECNAME,
                                 "%s: CNAME and other data at %s (type %u, see also %s)", w1,
                                 NAME(), late == cname ? early->type : late->type, w2);
    }
    /* a node stores its RRset count in one byte: 255 types at one name is already absurd */
    if (nsets > UINT8_MAX) {
        zone_builder_where(b, run_first(b, f, &f->runs[b->nm[id].first]), w1, sizeof(w1));
        return zone_builder_fail(f, TERN_ELIMIT, "%s: more than %u record types at one name", w1,
                                 UINT8_MAX);
    }
    const uint8_t *lc = b->names + b->nm[id].off;
    if (ns && lc[0] == 1 && lc[1] == '*') {
        /* RFC 4592 §4.2: a wildcard delegation would be answered as data by some servers and as
         * a referral by others; tern refuses it, so the zone means one thing everywhere */
        zone_builder_where(b, ns, w1, sizeof(w1));
        return zone_builder_fail(
            f, TERN_EINVAL,
            "%s: NS records at the wildcard %s: a wildcard cannot be a delegation "
            "(RFC 4592 section 4.2)",
            w1, NAME());
    }
    if (ns && dname && id != 0) {
        const struct brr *late = ns > dname ? ns : dname;
        zone_builder_where(b, late, w1, sizeof(w1));
        zone_builder_where(b, late == ns ? dname : ns, w2, sizeof(w2));
        return zone_builder_fail(
            f, TERN_EINVAL,
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
        rc = zone_builder_nomem(f);
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
    uint32_t apex_id = zone_builder_name_find(b, b->apex, b->apex_len, dname_hash(b->apex));
    if (apex_id == NO_ID)
        return zone_builder_fail(f, TERN_ENOSOA, "%s: no SOA record at the apex of zone %s",
                                 b->source, f->zname);
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
        return zone_builder_fail(f, TERN_ENOSOA, "%s: no SOA record at the apex of zone %s",
                                 f->b->source, f->zname);
    if (!name_run(f, 0, WIRE_T_NS))
        return zone_builder_fail(f, TERN_ENONS, "%s: no NS record at the apex of zone %s",
                                 f->b->source, f->zname);
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
        uint32_t pid = zone_builder_name_find(b, p, plen, ph);
        if (pid == NO_ID && zone_builder_name_add(b, p, plen, ph, poff, &pid) < 0)
            return zone_builder_nomem(f);
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
        return zone_builder_nomem(f);
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
        return zone_builder_nomem(f);
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
        zone_builder_where(b, run_first(b, f, &f->runs[b->nm[id].first]), w1, sizeof(w1));
        zone_builder_where(b, run_first(b, f, name_run(f, above[id], WIRE_T_DNAME)), w2,
                           sizeof(w2));
        zone_builder_name_str(b, id, nbuf, sizeof(nbuf));
        zone_builder_name_str(b, above[id], dbuf, sizeof(dbuf));
        rc = zone_builder_fail(
            f, TERN_EINVAL,
            "%s: %s is below the DNAME at %s (%s) and would never be answered (RFC "
            "6672 section 2.4)",
            w1, nbuf, dbuf, w2);
    }
    free(above);
    return rc;
}

int zone_builder_check(struct fctx *f)
{
    int rc;
    if ((rc = apex_first(f)) < 0 || (rc = group_runs(f)) < 0 || (rc = check_apex(f)) < 0 ||
        (rc = add_ents(f)) < 0 || (rc = order_by_labels(f)) < 0 ||
        (rc = check_dname_occlusion(f)) < 0)
        return rc;
    return 0;
}
