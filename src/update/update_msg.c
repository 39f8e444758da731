/*
 * update_msg.c — see update_msg.h. Parsing reads every record with the same checks a transfer's
 * records get (dname_unpack(), wire_rdata_unpack()); evaluation works on copies of the touched
 * names' RRsets ("the working set"), so the zone served is never written and a refusal leaves
 * nothing behind.
 */
#include "tern/update/update_msg.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/common/arena.h"
#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/wire/parse.h"
#include "tern/wire/rdata.h"
#include "tern/wire/rr.h"
#include "tern/xfr/journal.h" /* RFC 1982 serial arithmetic */

static unsigned fail(unsigned rcode, char *why, size_t whylen, const char *fmt, ...)
    TERN_PRINTF(4, 5);

static unsigned fail(unsigned rcode, char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    return rcode;
}

const char *update_rcode_name(unsigned rcode)
{
    static const char *const names[] = {"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN",
                                        "NOTIMP",  "REFUSED", "YXDOMAIN", "YXRRSET",
                                        "NXRRSET", "NOTAUTH", "NOTZONE"};
    return rcode < sizeof(names) / sizeof(names[0]) ? names[rcode] : "RCODE?";
}

/* ---- parsing --------------------------------------------------------------------------- */

/* The record at msg[*pos] into r, its owner lowercased and its RDATA's names decompressed
 * (copied into m's arena through scratch, UINT16_MAX bytes). 0, or -1 with why. */
static int read_rr(update_msg_t *m, const uint8_t *msg, size_t len, size_t *pos, uint8_t *scratch,
                   update_rr_t *r, char *why, size_t whylen)
{
    uint8_t owner[DNAME_MAXLEN];
    dname_unpack_err_t e;
    char t[128];
    size_t at = *pos;
    int n = dname_unpack(msg, len, len, pos, owner, &e);
    if (n < 0) {
        snprintf(why, whylen, "the record at offset %zu: %s", at,
                 dname_unpack_err_text(&e, t, sizeof(t)));
        return -1;
    }
    size_t p = *pos;
    if (len - p < 10 || len - p - 10 < tern_rd16(msg + p + 8)) {
        snprintf(why, whylen, "the record at offset %zu is cut short", at);
        return -1;
    }
    r->type = tern_rd16(msg + p);
    r->rclass = tern_rd16(msg + p + 2);
    r->ttl = tern_rd32(msg + p + 4);
    uint16_t rdlen = tern_rd16(msg + p + 8);
    /* no RDATA: a deletion's or a prerequisite's (class ANY or NONE), not a malformed record */
    int k = rdlen ? wire_rdata_unpack(msg, len, p + 10, rdlen, r->type, scratch, &e) : 0;
    if (k < 0) {
        if (e.fault != DNAME_FAULT_NONE)
            snprintf(why, whylen, "the RDATA of the record at offset %zu: %s", at,
                     dname_unpack_err_text(&e, t, sizeof(t)));
        else
            snprintf(why, whylen, "the RDATA of the record at offset %zu does not fit its type %u",
                     at, r->type);
        return -1;
    }
    uint8_t lc[DNAME_MAXLEN];
    dname_lower(lc, owner);
    r->owner_len = (uint8_t)n;
    r->rdlen = (uint16_t)k;
    if (!(r->owner = arena_memdup(m->arena, lc, (size_t)n)) ||
        !(r->rdata = arena_memdup(m->arena, scratch, (size_t)k + 1))) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    *pos = p + 10 + rdlen;
    return 0;
}

static unsigned read_section(update_msg_t *m, const uint8_t *msg, size_t len, size_t *pos,
                             uint8_t *scratch, update_rr_t *rrs, size_t n, const char *what,
                             char *why, size_t whylen)
{
    char r[256];
    for (size_t i = 0; i < n; i++)
        if (read_rr(m, msg, len, pos, scratch, &rrs[i], r, sizeof(r)) < 0)
            return fail(WIRE_RC_FORMERR, why, whylen, "%s %zu: %s", what, i + 1, r);
    return WIRE_RC_NOERROR;
}

unsigned update_msg_parse(update_msg_t *m, const uint8_t *msg, size_t len, size_t max_rrs,
                          char *why, size_t whylen)
{
    memset(m, 0, sizeof(*m));
    if (len < WIRE_HDR_LEN)
        return fail(WIRE_RC_FORMERR, why, whylen, "%zu bytes: shorter than a header", len);
    m->id = tern_rd16(msg);
    unsigned zo = tern_rd16(msg + 4), pr = tern_rd16(msg + 6), up = tern_rd16(msg + 8);
    if (zo != 1)
        return fail(WIRE_RC_FORMERR, why, whylen,
                    "the zone section holds %u entries (RFC 2136 §3.1.1: exactly one)", zo);
    if ((size_t)pr + up > max_rrs)
        return fail(WIRE_RC_REFUSED, why, whylen,
                    "%u prerequisites and updates: more than update_max_records (%zu)", pr + up,
                    max_rrs);
    size_t pos = WIRE_HDR_LEN;
    uint8_t zone[DNAME_MAXLEN];
    dname_unpack_err_t e;
    char t[128];
    int n = dname_unpack(msg, len, len, &pos, zone, &e);
    if (n < 0)
        return fail(WIRE_RC_FORMERR, why, whylen, "the zone name: %s",
                    dname_unpack_err_text(&e, t, sizeof(t)));
    if (len - pos < 4)
        return fail(WIRE_RC_FORMERR, why, whylen, "the zone section is cut short");
    if (tern_rd16(msg + pos) != WIRE_T_SOA)
        return fail(WIRE_RC_FORMERR, why, whylen,
                    "the zone section's type is %u, not SOA (RFC 2136 §2.3)", tern_rd16(msg + pos));
    m->zclass = tern_rd16(msg + pos + 2);
    pos += 4;
    m->zone_len = (uint8_t)dname_lower(m->zone, zone);
    uint8_t *scratch = malloc(UINT16_MAX);
    m->arena = arena_create();
    m->pre = calloc(pr ? pr : 1, sizeof(*m->pre));
    m->upd = calloc(up ? up : 1, sizeof(*m->upd));
    unsigned rc = WIRE_RC_NOERROR;
    if (!scratch || !m->arena || !m->pre || !m->upd)
        rc = fail(WIRE_RC_SERVFAIL, why, whylen, "out of memory");
    if (rc == WIRE_RC_NOERROR)
        rc = read_section(m, msg, len, &pos, scratch, m->pre, pr, "prerequisite", why, whylen);
    if (rc == WIRE_RC_NOERROR)
        rc = read_section(m, msg, len, &pos, scratch, m->upd, up, "update", why, whylen);
    free(scratch);
    /* the additional section holds the TSIG the transfer side verified, and perhaps an OPT:
     * nothing of it is an update */
    if (rc != WIRE_RC_NOERROR) {
        update_msg_free(m);
        return rc;
    }
    m->npre = pr;
    m->nupd = up;
    return WIRE_RC_NOERROR;
}

void update_msg_free(update_msg_t *m)
{
    free(m->pre);
    free(m->upd);
    arena_destroy(m->arena);
    memset(m, 0, sizeof(*m));
}

/* ---- the working set ------------------------------------------------------------------- */

typedef struct wrr {
    uint16_t rdlen;
    const uint8_t *rdata;
} wrr_t;

/* One RRset of a touched name: as it is now (rr, ttl) and as the zone has it (rr0, ttl0). */
typedef struct wset {
    uint16_t type;
    uint32_t ttl, ttl0;
    wrr_t *rr, *rr0;
    size_t n, cap, n0;
} wset_t;

typedef struct wname {
    const uint8_t *owner;
    uint8_t len;
    bool apex;
    wset_t *set;
    size_t n, cap;
} wname_t;

typedef struct work {
    const zone_t *z;
    const update_opts_t *o;
    wname_t *names;
    size_t n, cap;
} work_t;

/* The types whose records a zone tern signs keeps to itself. */
static bool dnssec_type(uint16_t t)
{
    return t == WIRE_T_DNSKEY || t == WIRE_T_RRSIG || t == WIRE_T_NSEC || t == WIRE_T_NSEC3 ||
           t == WIRE_T_NSEC3PARAM;
}

static bool meta_type(uint16_t t)
{
    return (t >= WIRE_T_META_MIN && t <= WIRE_T_META_MAX) || t == WIRE_T_OPT || t == 0;
}

/* Whether two RDATA of type are one RR: compared canonically (RFC 4034 §6.2: the names of the
 * types wire_rdata_layout() knows compare case-insensitively). Such RDATA is at most 6 + 2 * 255
 * + 20 bytes when it is well formed; longer ones compare as bytes. */
static bool rdata_eq(uint16_t type, const wrr_t *a, const wrr_t *b)
{
    if (a->rdlen != b->rdlen)
        return false;
    wire_rdata_layout_t l;
    if (!wire_rdata_layout(type, &l) || a->rdlen > 600)
        return memcmp(a->rdata, b->rdata, a->rdlen) == 0;
    uint8_t ca[600], cb[600];
    wire_rdata_canon(type, a->rdata, a->rdlen, ca);
    wire_rdata_canon(type, b->rdata, b->rdlen, cb);
    return memcmp(ca, cb, a->rdlen) == 0;
}

static bool in_zone(const zone_t *z, const uint8_t *owner)
{
    return dname_is_subdomain(owner, z->apex);
}

static const zone_node_t *node_of(const zone_t *z, const uint8_t *owner, size_t len)
{
    return zone_find_node(z, owner, len, dname_hash(owner));
}

static wset_t *set_find(wname_t *w, uint16_t type)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->set[i].type == type)
            return &w->set[i];
    return NULL;
}

static wset_t *set_get(wname_t *w, uint16_t type)
{
    wset_t *s = set_find(w, type);
    if (s)
        return s;
    if (tern_grow((void **)&w->set, &w->cap, w->n + 1, sizeof(*w->set)) < 0)
        return NULL;
    s = &w->set[w->n++];
    memset(s, 0, sizeof(*s));
    s->type = type;
    return s;
}

static int set_push(wset_t *s, uint16_t rdlen, const uint8_t *rdata)
{
    if (tern_grow((void **)&s->rr, &s->cap, s->n + 1, sizeof(*s->rr)) < 0)
        return TERN_ENOMEM;
    s->rr[s->n++] = (wrr_t){rdlen, rdata};
    return 0;
}

/* The touched name owner: its RRsets as the zone holds them, copied on first touch. */
static wname_t *name_get(work_t *w, const uint8_t *owner, uint8_t len)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->names[i].len == len && memcmp(w->names[i].owner, owner, len) == 0)
            return &w->names[i];
    if (tern_grow((void **)&w->names, &w->cap, w->n + 1, sizeof(*w->names)) < 0)
        return NULL;
    wname_t *nm = &w->names[w->n++];
    memset(nm, 0, sizeof(*nm));
    nm->owner = owner;
    nm->len = len;
    nm->apex = len == w->z->apex_len && memcmp(owner, w->z->apex, len) == 0;
    const zone_node_t *node = node_of(w->z, owner, len);
    for (unsigned i = 0; node && i < node->nrrsets; i++) {
        const zone_rrset_t *zs = &node->rrsets[i];
        if (w->o->dnssec && zs->type == WIRE_T_DNSKEY)
            continue; /* the keys' own: the builder adds them */
        wset_t *s = set_get(nm, zs->type);
        if (!s)
            return NULL;
        s->ttl = s->ttl0 = zs->ttl;
        const uint8_t *p = zs->rdata;
        for (unsigned k = 0; k < zs->count; k++) {
            if (set_push(s, tern_rd16(p), p + 2) < 0)
                return NULL;
            p += 2 + tern_rd16(p);
        }
        s->n0 = s->n;
        if (!(s->rr0 = malloc((s->n ? s->n : 1) * sizeof(*s->rr0))))
            return NULL;
        memcpy(s->rr0, s->rr, s->n * sizeof(*s->rr0));
    }
    return nm;
}

static void work_free(work_t *w)
{
    for (size_t i = 0; i < w->n; i++) {
        for (size_t j = 0; j < w->names[i].n; j++) {
            free(w->names[i].set[j].rr);
            free(w->names[i].set[j].rr0);
        }
        free(w->names[i].set);
    }
    free(w->names);
}

/* ---- prerequisites (RFC 2136 §3.2) ------------------------------------------------------- */

static const char *type_text(uint16_t type, char *buf, size_t len)
{
    static const struct {
        uint16_t t;
        const char *n;
    } names[] = {{WIRE_T_A, "A"},         {WIRE_T_NS, "NS"},       {WIRE_T_CNAME, "CNAME"},
                 {WIRE_T_SOA, "SOA"},     {WIRE_T_PTR, "PTR"},     {WIRE_T_MX, "MX"},
                 {WIRE_T_TXT, "TXT"},     {WIRE_T_AAAA, "AAAA"},   {WIRE_T_SRV, "SRV"},
                 {WIRE_T_DNAME, "DNAME"}, {WIRE_T_DS, "DS"},       {WIRE_T_DNSKEY, "DNSKEY"},
                 {WIRE_T_CAA, "CAA"},     {WIRE_T_HTTPS, "HTTPS"}, {WIRE_T_ANY, "ANY"}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (names[i].t == type)
            return names[i].n;
    snprintf(buf, len, "TYPE%u", type);
    return buf;
}

/* "prerequisite 2: www.example. A" */
static const char *rr_where(const char *what, size_t i, const update_rr_t *r, char *buf, size_t len)
{
    char name[DNAME_KEY_MAX], tb[16];
    if (dname_to_str(r->owner, name, sizeof(name)) < 0)
        snprintf(name, sizeof(name), "?");
    snprintf(buf, len, "%s %zu: %s %s", what, i + 1, name, type_text(r->type, tb, sizeof(tb)));
    return buf;
}

/* §3.2.3: the value-dependent prerequisites of prerequisite i's owner and type (every one of
 * them in the message) against the zone's RRset, compared as sets. */
static bool rrset_equals(const zone_t *z, const update_msg_t *m, size_t i)
{
    const update_rr_t *r = &m->pre[i];
    const zone_node_t *node = node_of(z, r->owner, r->owner_len);
    const zone_rrset_t *zs = node ? zone_node_rrset(node, r->type) : NULL;
    if (!zs)
        return false;
    /* every prerequisite RR of (owner, type) is in the RRset ... */
    size_t distinct = 0;
    for (size_t j = 0; j < m->npre; j++) {
        const update_rr_t *q = &m->pre[j];
        if (q->rclass != m->zclass || q->type != r->type || q->owner_len != r->owner_len ||
            memcmp(q->owner, r->owner, r->owner_len) != 0)
            continue;
        const wrr_t a = {q->rdlen, q->rdata};
        bool dup = false;
        for (size_t k = 0; k < j && !dup; k++) {
            const update_rr_t *o = &m->pre[k];
            dup = o->rclass == m->zclass && o->type == q->type && o->owner_len == q->owner_len &&
                  memcmp(o->owner, q->owner, q->owner_len) == 0 &&
                  rdata_eq(q->type, &a, &(wrr_t){o->rdlen, o->rdata});
        }
        if (dup)
            continue;
        distinct++;
        bool found = false;
        const uint8_t *p = zs->rdata;
        for (unsigned k = 0; k < zs->count && !found; k++) {
            found = rdata_eq(r->type, &a, &(wrr_t){tern_rd16(p), p + 2});
            p += 2 + tern_rd16(p);
        }
        if (!found)
            return false;
    }
    /* ... and the RRset has no RR beyond them */
    return distinct == zs->count;
}

static unsigned check_prereqs(const zone_t *z, const update_msg_t *m, char *why, size_t whylen)
{
    char w[DNAME_KEY_MAX + 64];
    for (size_t i = 0; i < m->npre; i++) {
        const update_rr_t *r = &m->pre[i];
        if (r->ttl != 0)
            return fail(WIRE_RC_FORMERR, why, whylen, "%s: TTL %u, not 0",
                        rr_where("prerequisite", i, r, w, sizeof(w)), r->ttl);
        if (!in_zone(z, r->owner))
            return fail(WIRE_RC_NOTZONE, why, whylen, "%s: not in the zone",
                        rr_where("prerequisite", i, r, w, sizeof(w)));
        const zone_node_t *node = node_of(z, r->owner, r->owner_len);
        bool in_use = node && node->nrrsets > 0;
        bool exists = node && zone_node_rrset(node, r->type) != NULL;
        if (r->rclass == WIRE_CLASS_ANY || r->rclass == WIRE_CLASS_NONE) {
            bool any = r->rclass == WIRE_CLASS_ANY;
            if (r->rdlen != 0)
                return fail(WIRE_RC_FORMERR, why, whylen, "%s: class %s with RDATA",
                            rr_where("prerequisite", i, r, w, sizeof(w)), any ? "ANY" : "NONE");
            if (r->type == WIRE_T_ANY && any && !in_use)
                return fail(WIRE_RC_NXDOMAIN, why, whylen, "%s: the name is not in use",
                            rr_where("prerequisite", i, r, w, sizeof(w)));
            if (r->type == WIRE_T_ANY && !any && in_use)
                return fail(WIRE_RC_YXDOMAIN, why, whylen, "%s: the name is in use",
                            rr_where("prerequisite", i, r, w, sizeof(w)));
            if (r->type != WIRE_T_ANY && any && !exists)
                return fail(WIRE_RC_NXRRSET, why, whylen, "%s: the RRset does not exist",
                            rr_where("prerequisite", i, r, w, sizeof(w)));
            if (r->type != WIRE_T_ANY && !any && exists)
                return fail(WIRE_RC_YXRRSET, why, whylen, "%s: the RRset exists",
                            rr_where("prerequisite", i, r, w, sizeof(w)));
        } else if (r->rclass != m->zclass) {
            return fail(WIRE_RC_FORMERR, why, whylen, "%s: class %u",
                        rr_where("prerequisite", i, r, w, sizeof(w)), r->rclass);
        }
    }
    for (size_t i = 0; i < m->npre; i++)
        if (m->pre[i].rclass == m->zclass && !rrset_equals(z, m, i))
            return fail(WIRE_RC_NXRRSET, why, whylen, "%s: the RRset is not the one given",
                        rr_where("prerequisite", i, &m->pre[i], w, sizeof(w)));
    return WIRE_RC_NOERROR;
}

/* ---- the update section (RFC 2136 §3.4) ------------------------------------------------ */

static unsigned prescan(const zone_t *z, const update_msg_t *m, const update_opts_t *o, char *why,
                        size_t whylen)
{
    char w[DNAME_KEY_MAX + 64];
    for (size_t i = 0; i < m->nupd; i++) {
        const update_rr_t *r = &m->upd[i];
        if (!in_zone(z, r->owner))
            return fail(WIRE_RC_NOTZONE, why, whylen, "%s: not in the zone",
                        rr_where("update", i, r, w, sizeof(w)));
        bool bad;
        if (r->rclass == m->zclass)
            bad = meta_type(r->type);
        else if (r->rclass == WIRE_CLASS_ANY)
            bad = r->ttl != 0 || r->rdlen != 0 || (meta_type(r->type) && r->type != WIRE_T_ANY);
        else if (r->rclass == WIRE_CLASS_NONE)
            bad = r->ttl != 0 || meta_type(r->type);
        else
            bad = true;
        if (bad)
            return fail(WIRE_RC_FORMERR, why, whylen,
                        "%s: class %u, TTL %u, %u bytes of RDATA: not an update (RFC 2136 "
                        "§3.4.1.3)",
                        rr_where("update", i, r, w, sizeof(w)), r->rclass, r->ttl, r->rdlen);
        if (o->dnssec && dnssec_type(r->type))
            return fail(WIRE_RC_REFUSED, why, whylen,
                        "%s: the zone is signed by tern, which keeps its DNSSEC records itself",
                        rr_where("update", i, r, w, sizeof(w)));
    }
    return WIRE_RC_NOERROR;
}

static bool has_other_data(const wname_t *nm)
{
    for (size_t i = 0; i < nm->n; i++)
        if (nm->set[i].n && nm->set[i].type != WIRE_T_CNAME && nm->set[i].type != WIRE_T_RRSIG &&
            nm->set[i].type != WIRE_T_NSEC)
            return true;
    return false;
}

/* §3.4.2.2: add r to its RRset (the SOA: replace it when the serial grows). */
static int add_rr(wname_t *nm, const update_rr_t *r, bool *soa_set)
{
    const wrr_t a = {r->rdlen, r->rdata};
    wset_t *cname = set_find(nm, WIRE_T_CNAME);
    if (r->type == WIRE_T_CNAME
            ? has_other_data(nm)
            : (cname && cname->n && r->type != WIRE_T_RRSIG && r->type != WIRE_T_NSEC))
        return 0; /* CNAME and other data: ignored, as the RFC says */
    wset_t *s = r->type == WIRE_T_SOA ? set_find(nm, WIRE_T_SOA) : set_get(nm, r->type);
    if (!s)
        return r->type == WIRE_T_SOA ? 0 : TERN_ENOMEM; /* an SOA only replaces one */
    if (r->type == WIRE_T_SOA) {
        if (!s->n || r->rdlen < 20 || s->rr[0].rdlen < 20 ||
            !xfr_serial_gt(tern_rd32(r->rdata + r->rdlen - 20),
                           tern_rd32(s->rr[0].rdata + s->rr[0].rdlen - 20)))
            return 0;
        s->rr[0] = a;
        s->ttl = r->ttl;
        *soa_set = nm->apex;
        return 0;
    }
    if (r->type == WIRE_T_CNAME && s->n) {
        s->rr[0] = a; /* a name holds one CNAME: the new one replaces it */
        s->ttl = r->ttl;
        return 0;
    }
    s->ttl = r->ttl;
    for (size_t i = 0; i < s->n; i++)
        if (rdata_eq(r->type, &s->rr[i], &a)) {
            s->rr[i] = a;
            return 0;
        }
    return set_push(s, r->rdlen, r->rdata);
}

/* §3.4.2.3 and §3.4.2.4: delete the RRset, every RRset of the name, or one RR. */
static void delete_rr(wname_t *nm, const update_rr_t *r)
{
    bool keep_apex = nm->apex; /* the apex SOA and NS stay */
    if (r->rclass == WIRE_CLASS_ANY) {
        for (size_t i = 0; i < nm->n; i++) {
            wset_t *s = &nm->set[i];
            if ((r->type == WIRE_T_ANY || s->type == r->type) &&
                !(keep_apex && (s->type == WIRE_T_SOA || s->type == WIRE_T_NS)))
                s->n = 0;
        }
        return;
    }
    wset_t *s = set_find(nm, r->type);
    if (!s || r->type == WIRE_T_SOA)
        return;
    const wrr_t a = {r->rdlen, r->rdata};
    for (size_t i = 0; i < s->n; i++)
        if (rdata_eq(r->type, &s->rr[i], &a)) {
            if (keep_apex && r->type == WIRE_T_NS && s->n == 1)
                return; /* §7.17 ... the last NS of the apex stays */
            memmove(&s->rr[i], &s->rr[i + 1], (s->n - i - 1) * sizeof(*s->rr));
            s->n--;
            return;
        }
}

/* ---- the change ------------------------------------------------------------------------ */

static bool in_set(uint16_t type, const wrr_t *rr, size_t n, const wrr_t *a)
{
    for (size_t i = 0; i < n; i++)
        if (rdata_eq(type, &rr[i], a))
            return true;
    return false;
}

static int emit(update_change_t *ch, bool added, const wname_t *nm, const wset_t *s, const wrr_t *r,
                size_t *cap)
{
    update_rr_t **list = added ? &ch->added : &ch->removed;
    size_t *n = added ? &ch->nadded : &ch->nremoved;
    if (tern_grow((void **)list, cap, *n + 1, sizeof(**list)) < 0)
        return TERN_ENOMEM;
    update_rr_t *o = &(*list)[(*n)++];
    *o = (update_rr_t){.owner = nm->owner,
                       .owner_len = nm->len,
                       .type = s->type,
                       .rclass = WIRE_CLASS_IN,
                       .ttl = added ? s->ttl : s->ttl0,
                       .rdlen = r->rdlen,
                       .rdata = arena_memdup(ch->arena, r->rdata, (size_t)r->rdlen + 1)};
    return o->rdata ? 0 : TERN_ENOMEM;
}

/* What changed, RRset by RRset: an RRset whose TTL changed is all its old RRs out and all its
 * new ones in (as an IXFR carries it). The apex SOA is kept apart. */
static int diff(const work_t *w, update_change_t *ch, bool *changed)
{
    size_t capr = 0, capa = 0;
    for (size_t i = 0; i < w->n; i++) {
        const wname_t *nm = &w->names[i];
        bool touched = false;
        for (size_t j = 0; j < nm->n; j++) {
            const wset_t *s = &nm->set[j];
            if (nm->apex && s->type == WIRE_T_SOA)
                continue;
            bool ttl = s->n && s->n0 && s->ttl != s->ttl0;
            for (size_t k = 0; k < s->n0; k++)
                if (ttl || !in_set(s->type, s->rr, s->n, &s->rr0[k])) {
                    if (emit(ch, false, nm, s, &s->rr0[k], &capr) < 0)
                        return TERN_ENOMEM;
                    touched = true;
                }
            for (size_t k = 0; k < s->n; k++)
                if (ttl || !in_set(s->type, s->rr0, s->n0, &s->rr[k])) {
                    if (emit(ch, true, nm, s, &s->rr[k], &capa) < 0)
                        return TERN_ENOMEM;
                    touched = true;
                }
        }
        ch->names += touched;
        *changed |= touched;
    }
    return 0;
}

/* The apex SOA after the update: the update's own when it set a greater serial, else the
 * zone's with the serial one up when anything changed. */
static void new_soa(const work_t *w, update_change_t *ch, bool soa_set, bool changed)
{
    const zone_t *z = w->z;
    const uint8_t *zs = z->soa->rdata;
    uint16_t len = tern_rd16(zs);
    const uint8_t *rd = zs + 2;
    uint32_t ttl = z->soa->ttl;
    if (soa_set) {
        for (size_t i = 0; i < w->n; i++)
            if (w->names[i].apex) {
                const wset_t *s = set_find(&w->names[i], WIRE_T_SOA);
                len = s->rr[0].rdlen;
                rd = s->rr[0].rdata;
                ttl = s->ttl;
            }
    }
    memcpy(ch->soa, rd, len);
    ch->soa_len = len;
    ch->soa_ttl = ttl;
    /* the source's serial: one raised for secondaries (a signed zone's) is not the journal's */
    ch->from = z->src_serial;
    if (!soa_set)
        tern_wr32(ch->soa + len - 20, z->src_serial + (changed ? 1u : 0u));
    ch->to = tern_rd32(ch->soa + len - 20);
}

unsigned update_eval(const zone_t *z, const update_msg_t *m, const update_opts_t *o,
                     update_change_t *ch, char *why, size_t whylen)
{
    memset(ch, 0, sizeof(*ch));
    unsigned rc = check_prereqs(z, m, why, whylen);
    if (rc == WIRE_RC_NOERROR)
        rc = prescan(z, m, o, why, whylen);
    if (rc != WIRE_RC_NOERROR)
        return rc;
    work_t w = {.z = z, .o = o};
    bool soa_set = false, changed = false;
    if (!(ch->arena = arena_create()))
        goto nomem;
    for (size_t i = 0; i < m->nupd; i++) {
        const update_rr_t *r = &m->upd[i];
        wname_t *nm = name_get(&w, r->owner, r->owner_len);
        if (!nm)
            goto nomem;
        if (r->rclass == m->zclass) {
            if (add_rr(nm, r, &soa_set) < 0)
                goto nomem;
        } else {
            delete_rr(nm, r);
        }
    }
    for (size_t i = 0; i < w.n; i++)
        if (!(w.names[i].owner = arena_memdup(ch->arena, w.names[i].owner, w.names[i].len)))
            goto nomem;
    if (diff(&w, ch, &changed) < 0)
        goto nomem;
    new_soa(&w, ch, soa_set, changed);
    work_free(&w);
    return WIRE_RC_NOERROR;
nomem:
    work_free(&w);
    update_change_free(ch);
    return fail(WIRE_RC_SERVFAIL, why, whylen, "out of memory");
}

void update_change_free(update_change_t *ch)
{
    free(ch->removed);
    free(ch->added);
    arena_destroy(ch->arena);
    memset(ch, 0, sizeof(*ch));
}
