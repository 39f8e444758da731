/*
 * dnssec_zone.c — see dnssec_zone.h: signing a zone ahead, the per-worker signature cache, the
 * compact-denial NSEC.
 */
#include "tern/dnssec/dnssec_zone.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/common/hash.h"
#include "tern/dnssec/dnssec_export.h"
#include "tern/wire/rr.h"

static uint64_t next_gen = 1; /* loader thread only */

void dnssec_sigs_free(dnssec_sigs_t *s)
{
    if (!s)
        return;
    free(s->at);
    free(s->blob);
    free(s);
}

void dnssec_zone_free(dnssec_zone_t *dz)
{
    if (!dz)
        return;
    dnssec_sigs_free(dz->sigs);
    dnssec_export_free(dz->export);
    if (dz->zsk_ctx)
        for (unsigned i = 0; i < (dz->nworkers + 1) * dz->nzsk; i++)
            dnssec_keyctx_free(dz->zsk_ctx[i]);
    free(dz->zsk_ctx);
    if (dz->loader_ksk)
        for (unsigned i = 0; i < dz->nksk; i++)
            dnssec_keyctx_free(dz->loader_ksk[i]);
    free(dz->loader_ksk);
    for (unsigned i = 0; i < dz->nzsk; i++)
        dnssec_keyctx_free(dz->loader_zsk[i]);
    for (unsigned i = 0; i < dz->nkeys; i++)
        dnssec_key_free(dz->keys[i]);
    free(dz->keys);
    free(dz->roles);
    free(dz);
}

void dnssec_name_text(const uint8_t *name, char *buf, size_t len)
{
    if (dname_to_str(name, buf, len) < 0)
        snprintf(buf, len, "?");
}

int dnssec_zone_new(const uint8_t *origin, dnssec_key_t **keys, unsigned nkeys, unsigned nworkers,
                    const dnssec_policy_t *policy, dnssec_zone_t **out, char *err, size_t errlen)
{
    return dnssec_zone_new_roles(origin, keys, NULL, nkeys, 0, false, nworkers, policy, out, err,
                                 errlen);
}

/* dnssec_zone_new_roles(): every key belongs to the zone and is a zone key; static keys (no
 * roles) share the first one's algorithm. */
static int check_keys(const dnssec_zone_t *dz, const uint8_t *origin, bool managed, const char *zn,
                      char *err, size_t errlen)
{
    for (unsigned i = 0; i < dz->nkeys; i++) {
        const dnssec_key_t *k = dz->keys[i];
        if (!dname_equal(k->owner, origin)) {
            snprintf(err, errlen, "zone %s: key %s belongs to another zone", zn, k->label);
            return TERN_EINVAL;
        }
        if (!(k->flags & DNSSEC_FLAG_ZONE)) {
            snprintf(err, errlen, "zone %s: key %s is not a zone key (flags %u)", zn, k->label,
                     k->flags);
            return TERN_EINVAL;
        }
        if (!managed && k->alg != dz->keys[0]->alg) {
            /* RFC 6840 §5.11: a validator may expect every algorithm of the DNSKEY RRset to
             * sign every RRset; static keys sign with one (a policy's algorithm rollover signs
             * with both, in the order RFC 6781 §4.1.4 gives) */
            snprintf(err, errlen,
                     "zone %s: key %s uses algorithm %u, key %s %u: one algorithm "
                     "per zone",
                     zn, k->label, k->alg, dz->keys[0]->label, dz->keys[0]->alg);
            return TERN_EINVAL;
        }
    }
    return 0;
}

/* Every algorithm of the published keys has a key signing the zone and one signing DNSKEY
 * (RFC 4035 §2.2: "an RRSIG for each RRset using at least one DNSKEY of each algorithm in the
 * zone apex DNSKEY RRset"). */
static int every_algorithm_signs(const dnssec_zone_t *dz, const char *zn, char *err, size_t errlen)
{
    for (unsigned i = 0; i < dz->nkeys; i++) {
        if (!(dz->roles[i] & DNSSEC_ROLE_PUBLISH))
            continue;
        uint8_t alg = dz->keys[i]->alg, have = 0;
        for (unsigned j = 0; j < dz->nkeys; j++)
            if (dz->keys[j]->alg == alg)
                have |= dz->roles[j];
        if (!(have & DNSSEC_ROLE_SIGN_ZONE) || !(have & DNSSEC_ROLE_SIGN_DNSKEY)) {
            snprintf(err, errlen,
                     "zone %s: key %s (algorithm %u) is published but no key of its algorithm "
                     "signs %s",
                     zn, dz->keys[i]->label, alg,
                     (have & DNSSEC_ROLE_SIGN_ZONE) ? "the DNSKEY RRset" : "the zone");
            return TERN_EINVAL;
        }
    }
    return 0;
}

/* dnssec_zone_new_roles(): each key's roles (given, or from its flags), checked; the zone
 * signers and the number of DNSKEY signers. */
static int set_roles(dnssec_zone_t *dz, const uint8_t *roles, const char *zn, char *err,
                     size_t errlen)
{
    if (roles) {
        memcpy(dz->roles, roles, dz->nkeys);
    } else {
        /* every key published; SEP keys sign DNSKEY; the first other key the rest (only SEP
         * keys: the first signs everything, a combined signing key; no SEP key: the ZSK signs
         * the DNSKEY RRset too, its DS being what the parent holds) */
        int zsk = -1;
        bool sep = false;
        for (unsigned i = 0; i < dz->nkeys; i++) {
            dz->roles[i] = DNSSEC_ROLE_PUBLISH;
            if (dz->keys[i]->flags & DNSSEC_FLAG_SEP)
                dz->roles[i] |= DNSSEC_ROLE_SIGN_DNSKEY, sep = true;
            else if (zsk < 0)
                zsk = (int)i;
        }
        dz->roles[zsk < 0 ? 0 : zsk] |= DNSSEC_ROLE_SIGN_ZONE | (sep ? 0 : DNSSEC_ROLE_SIGN_DNSKEY);
    }
    for (unsigned i = 0; i < dz->nkeys; i++) {
        uint8_t r = dz->roles[i];
        /* a key may sign unpublished (an algorithm rollover's pre- and post-active keys:
         * signatures validators ignore), but a CDS names a key the parent will trust */
        if ((r & DNSSEC_ROLE_CDS) && !(r & DNSSEC_ROLE_PUBLISH)) {
            snprintf(err, errlen,
                     "zone %s: key %s is offered to the parent (CDS) but not published", zn,
                     dz->keys[i]->label);
            return TERN_EINVAL;
        }
        if (r & DNSSEC_ROLE_SIGN_ZONE) {
            if (dz->nzsk == DNSSEC_ZONE_SIGNERS_MAX) {
                snprintf(err, errlen, "zone %s: more than %d keys sign the zone (key %s)", zn,
                         DNSSEC_ZONE_SIGNERS_MAX, dz->keys[i]->label);
                return TERN_EINVAL;
            }
            dz->zsk[dz->nzsk++] = dz->keys[i];
        }
        if (r & DNSSEC_ROLE_SIGN_DNSKEY)
            dz->nksk++;
    }
    if (!dz->nzsk || !dz->nksk) {
        snprintf(err, errlen, "zone %s: no key signs %s", zn,
                 dz->nzsk ? "the DNSKEY RRset" : "the zone");
        return TERN_EINVAL;
    }
    return every_algorithm_signs(dz, zn, err, errlen);
    return 0;
}

int dnssec_zone_new_roles(const uint8_t *origin, dnssec_key_t **keys, const uint8_t *roles,
                          unsigned nkeys, unsigned cds_digest, bool cds_delete, unsigned nworkers,
                          const dnssec_policy_t *policy, dnssec_zone_t **out, char *err,
                          size_t errlen)
{
    char zn[DNAME_MAXLEN * 4 + 1];
    dnssec_name_text(origin, zn, sizeof(zn));
    *out = NULL;
    dnssec_zone_t *dz = calloc(1, sizeof(*dz));
    if (!dz) {
        for (unsigned i = 0; i < nkeys; i++)
            dnssec_key_free(keys[i]);
        snprintf(err, errlen, "zone %s: out of memory", zn);
        return TERN_ENOMEM;
    }
    dz->keys = calloc(nkeys ? nkeys : 1, sizeof(*dz->keys));
    dz->roles = calloc(nkeys ? nkeys : 1, sizeof(*dz->roles));
    if (!dz->keys || !dz->roles) {
        for (unsigned i = 0; i < nkeys; i++)
            dnssec_key_free(keys[i]);
        goto nomem;
    }
    if (nkeys)
        memcpy(dz->keys, keys, nkeys * sizeof(*keys));
    dz->nkeys = nkeys;
    dz->cds_digest = (uint8_t)cds_digest;
    dz->cds_delete = cds_delete;
    dz->nworkers = nworkers ? nworkers : 1;
    dz->policy.lifetime = policy && policy->lifetime ? policy->lifetime : DNSSEC_LIFETIME_DEFAULT;
    dz->policy.refresh = policy && policy->refresh ? policy->refresh : DNSSEC_REFRESH_DEFAULT;
    dz->policy.export = policy && policy->export;
    /* what remains of a fresh signature is the lifetime less the inception's hour back: the
     * refresh must leave it some time, or every check would sign again */
    if ((uint64_t)dz->policy.refresh + DNSSEC_INCEPTION_SKEW >= dz->policy.lifetime) {
        snprintf(err, errlen,
                 "zone %s: dnssec refresh (%u s) must be shorter than the signature "
                 "lifetime (%u s) less an hour",
                 zn, dz->policy.refresh, dz->policy.lifetime);
        goto fail;
    }
    if (nkeys == 0) {
        snprintf(err, errlen, "zone %s: dnssec is on but no key is given", zn);
        goto fail;
    }
    if (check_keys(dz, origin, roles != NULL, zn, err, errlen) < 0 ||
        set_roles(dz, roles, zn, err, errlen) < 0)
        goto fail;
    unsigned nksk = dz->nksk;
    dz->loader_ksk = calloc(nksk, sizeof(*dz->loader_ksk));
    /* one set per worker, and one for the control thread (DNSSEC_WORKER_CONTROL) */
    dz->zsk_ctx = calloc((size_t)(dz->nworkers + 1) * dz->nzsk, sizeof(*dz->zsk_ctx));
    if (!dz->loader_ksk || !dz->zsk_ctx)
        goto nomem;
    char kerr[256];
    for (unsigned j = 0; j < dz->nzsk; j++)
        if (!(dz->loader_zsk[j] = dnssec_keyctx_new(dz->zsk[j], kerr, sizeof(kerr)))) {
            snprintf(err, errlen, "zone %s: %s", zn, kerr);
            goto fail;
        }
    unsigned j = 0;
    for (unsigned i = 0; i < nkeys; i++) {
        if (!(dz->roles[i] & DNSSEC_ROLE_SIGN_DNSKEY))
            continue;
        if (!(dz->loader_ksk[j++] = dnssec_keyctx_new(keys[i], kerr, sizeof(kerr)))) {
            snprintf(err, errlen, "zone %s: %s", zn, kerr);
            goto fail;
        }
    }
    for (unsigned w = 0; w < (dz->nworkers + 1) * dz->nzsk; w++)
        if (!(dz->zsk_ctx[w] = dnssec_keyctx_new(dz->zsk[w % dz->nzsk], kerr, sizeof(kerr)))) {
            snprintf(err, errlen, "zone %s: %s", zn, kerr);
            goto fail;
        }
    dz->gen = __atomic_fetch_add(&next_gen, 1, __ATOMIC_RELAXED);
    *out = dz;
    return 0;
nomem:
    snprintf(err, errlen, "zone %s: out of memory", zn);
    dnssec_zone_free(dz);
    return TERN_ENOMEM;
fail:
    dnssec_zone_free(dz);
    return TERN_EINVAL;
}

/* One apex record into the builder's blob: type, RDLENGTH, RDATA. */
static int put_apex(uint8_t *out, size_t cap, size_t *pos, uint16_t type, const uint8_t *rd,
                    size_t len)
{
    if (*pos + 4 + len > cap)
        return TERN_ENOSPC;
    tern_wr16(out + *pos, type);
    tern_wr16(out + *pos + 2, (uint16_t)len);
    memcpy(out + *pos + 4, rd, len);
    *pos += 4 + len;
    return 0;
}

int dnssec_zone_dnskeys(const dnssec_zone_t *dz, uint8_t *out, size_t cap)
{
    size_t pos = 0;
    for (unsigned i = 0; i < dz->nkeys; i++) {
        const dnssec_key_t *k = dz->keys[i];
        if ((dz->roles[i] & DNSSEC_ROLE_PUBLISH) &&
            put_apex(out, cap, &pos, WIRE_T_DNSKEY, k->rdata, k->rdlen) < 0)
            return TERN_ENOSPC;
    }
    if (dz->cds_delete) {
        /* RFC 8078 §4: "0 0 0 00" and "0 3 0 AA==" */
        static const uint8_t cds[5] = {0, 0, 0, 0, 0}, cdnskey[5] = {0, 0, 3, 0, 0};
        if (put_apex(out, cap, &pos, WIRE_T_CDS, cds, sizeof(cds)) < 0 ||
            put_apex(out, cap, &pos, WIRE_T_CDNSKEY, cdnskey, sizeof(cdnskey)) < 0)
            return TERN_ENOSPC;
        return (int)pos;
    }
    for (unsigned i = 0; i < dz->nkeys && dz->cds_digest; i++) {
        if (!(dz->roles[i] & DNSSEC_ROLE_CDS))
            continue;
        const dnssec_key_t *k = dz->keys[i];
        uint8_t ds[4 + 64];
        int dl = dnssec_key_ds(k, dz->cds_digest, ds, sizeof(ds));
        if (dl < 0 || put_apex(out, cap, &pos, WIRE_T_CDS, ds, (size_t)dl) < 0 ||
            put_apex(out, cap, &pos, WIRE_T_CDNSKEY, k->rdata, k->rdlen) < 0)
            return TERN_ENOSPC;
    }
    return (int)pos;
}

uint32_t dnssec_zone_earliest(const dnssec_zone_t *dz)
{
    const dnssec_sigs_t *s = dnssec_zone_sigs(dz);
    uint32_t earliest = s ? s->earliest : 0;
    if (s && dz->export && (int32_t)(dz->export->earliest - earliest) < 0)
        earliest = dz->export->earliest;
    return earliest;
}

bool dnssec_zone_due(const dnssec_zone_t *dz, uint32_t now)
{
    return !dnssec_zone_sigs(dz) ||
           (int32_t)(dnssec_zone_earliest(dz) - now) < (int32_t)dz->policy.refresh;
}

bool dnssec_key_same(const dnssec_key_t *a, const dnssec_key_t *b)
{
    return a->rdlen == b->rdlen && memcmp(a->rdata, b->rdata, a->rdlen) == 0;
}

bool dnssec_zone_same_signers(const dnssec_zone_t *a, const dnssec_zone_t *b)
{
    if (a->nzsk != b->nzsk)
        return false;
    for (unsigned i = 0; i < a->nzsk; i++)
        if (!dnssec_key_same(a->zsk[i], b->zsk[i]))
            return false;
    return true;
}

/* The growing blob of one signing pass. */
struct pass {
    dnssec_sigs_t *s;
    size_t cap;
    dnssec_signer_t *signer;
    const zone_t *z;
    const dnssec_zone_t *dz;
    /* the previous version and what of its signatures may be taken over */
    const zone_t *prev;
    const dnssec_sigs_t *psg;
    bool same_zsk, same_ksk;
    uint32_t now;
    char *err;
    size_t errlen;
};

static int blob_room(struct pass *p, size_t n)
{
    dnssec_sigs_t *s = p->s;
    if (s->blob_len + n <= p->cap)
        return 0;
    size_t c = p->cap ? p->cap : 65536;
    while (c < s->blob_len + n)
        c *= 2;
    uint8_t *b = realloc(s->blob, c);
    if (!b)
        return TERN_ENOMEM;
    s->blob = b;
    p->cap = c;
    return 0;
}

static void rrset_str(const zone_node_t *n, uint16_t type, char *buf, size_t len)
{
    char name[DNAME_MAXLEN * 4 + 1];
    dnssec_name_text(n->name, name, sizeof(name));
    snprintf(buf, len, "%s type %u", name, type);
}

/* RRSIGs of RRset s at node n with the given contexts, appended to the blob; at[i] set. */
static int sign_rrset(struct pass *p, const zone_node_t *n, const zone_rrset_t *s,
                      dnssec_keyctx_t *const *kcs, unsigned nkc)
{
    dnssec_sigs_t *sg = p->s;
    size_t start = sg->blob_len;
    if (blob_room(p, 2) < 0)
        return TERN_ENOMEM;
    sg->blob[start] = (uint8_t)(nkc >> 8);
    sg->blob[start + 1] = (uint8_t)nkc;
    sg->blob_len += 2;
    dnssec_rrsig_req_t req = dnssec_node_req(n, s->type, s->ttl, sg, p->z->apex);
    for (unsigned k = 0; k < nkc; k++) {
        if (blob_room(p, 2 + DNSSEC_RRSIG_MAX) < 0)
            return TERN_ENOMEM;
        uint8_t *o = sg->blob + sg->blob_len;
        int len =
            dnssec_sign(p->signer, kcs[k], &req, s->count, s->rdata, NULL, o + 2, DNSSEC_RRSIG_MAX);
        if (len < 0) {
            char what[DNAME_MAXLEN * 4 + 32], zn[DNAME_MAXLEN * 4 + 1];
            rrset_str(n, s->type, what, sizeof(what));
            dnssec_name_text(p->z->apex, zn, sizeof(zn));
            snprintf(p->err, p->errlen, "zone %s: cannot sign %s with key %s: %s", zn, what,
                     dnssec_keyctx_key(kcs[k])->label,
                     len == TERN_ENOSPC ? "RRset too large" : "the key failed");
            return len;
        }
        o[0] = (uint8_t)(len >> 8);
        o[1] = (uint8_t)len;
        sg->blob_len += 2u + (size_t)len;
        sg->made++;
    }
    sg->at[s - p->z->rrsets] = (uint32_t)start + 1;
    return 0;
}

const zone_rrset_t *dnssec_prev_rrset(const zone_t *prev, const zone_node_t *n,
                                      const zone_rrset_t *s)
{
    const zone_node_t *pn = zone_find_node(prev, n->name, n->name_len, dname_hash(n->name));
    const zone_rrset_t *ps = pn ? zone_node_rrset(pn, s->type) : NULL;
    if (!ps || ps->ttl != s->ttl || ps->count != s->count || ps->rdata_len != s->rdata_len ||
        memcmp(ps->rdata, s->rdata, s->rdata_len) != 0)
        return NULL;
    return ps;
}

size_t dnssec_rrsigs_fresh(const uint8_t *seq, unsigned count, uint32_t now, uint32_t refresh,
                           uint32_t *earliest)
{
    const uint8_t *q = seq;
    *earliest = 0;
    for (unsigned i = 0; i < count; i++) {
        uint32_t exp = dnssec_rrsig_expiration(q + 2);
        if ((int32_t)(exp - now) <= (int32_t)refresh)
            return 0; /* due: made again */
        if (i == 0 || (int32_t)(exp - *earliest) < 0)
            *earliest = exp;
        q += 2 + tern_rd16(q);
    }
    return (size_t)(q - seq);
}

/* The KSKs of a and b (the keys signing DNSKEY) are the same, in the same order. */
static bool same_ksks(const dnssec_zone_t *a, const dnssec_zone_t *b)
{
    if (a->nksk != b->nksk)
        return false;
    for (unsigned i = 0; i < a->nksk; i++)
        if (!dnssec_key_same(dnssec_keyctx_key(a->loader_ksk[i]),
                             dnssec_keyctx_key(b->loader_ksk[i])))
            return false;
    return true;
}

/* RRset s at node n as the previous version signed it, copied into the blob, when the data and
 * the keys are the same and none of its signatures is due: 1; 0: sign it; negative: no memory. */
static int reuse_rrset(struct pass *p, const zone_node_t *n, const zone_rrset_t *s)
{
    bool dnskey = dnssec_ksk_signed(s->type) && n == p->z->apex_node;
    if (!p->psg || !(dnskey ? p->same_ksk : p->same_zsk))
        return 0;
    const zone_rrset_t *ps = dnssec_prev_rrset(p->prev, n, s);
    uint16_t count = 0;
    const uint8_t *sig = ps ? dnssec_static(p->psg, p->prev, ps, &count) : NULL;
    uint32_t earliest;
    size_t len =
        sig ? dnssec_rrsigs_fresh(sig, count, p->now, p->dz->policy.refresh, &earliest) : 0;
    if (!len)
        return 0;
    if (blob_room(p, 2 + len) < 0)
        return TERN_ENOMEM;
    dnssec_sigs_t *sg = p->s;
    size_t start = sg->blob_len;
    memcpy(sg->blob + start, sig - 2, 2 + len);
    sg->blob_len += 2 + len;
    sg->reused += count;
    if ((int32_t)(earliest - sg->earliest) < 0)
        sg->earliest = earliest;
    sg->at[s - p->z->rrsets] = (uint32_t)start + 1;
    return 1;
}

int dnssec_zone_sign(dnssec_zone_t *dz, const zone_t *z, uint32_t now, dnssec_sigs_t **old,
                     char *err, size_t errlen)
{
    return dnssec_zone_sign_from(dz, z, NULL, now, old, err, errlen);
}

int dnssec_zone_sign_from(dnssec_zone_t *dz, const zone_t *z, const zone_t *prev, uint32_t now,
                          dnssec_sigs_t **old, char *err, size_t errlen)
{
    char zn[DNAME_MAXLEN * 4 + 1];
    dnssec_name_text(z->apex, zn, sizeof(zn));
    *old = NULL;
    struct pass p = {.z = z, .dz = dz, .now = now, .err = err, .errlen = errlen};
    const dnssec_zone_t *pdz = prev && !prev->unavailable ? prev->dnssec : NULL;
    if (pdz && (p.psg = dnssec_zone_sigs(pdz))) {
        p.prev = prev;
        p.same_zsk = dnssec_zone_same_signers(pdz, dz);
        p.same_ksk = same_ksks(pdz, dz);
    }
    int rc = TERN_ENOMEM;
    p.s = calloc(1, sizeof(*p.s));
    if (!p.s || !(p.s->at = calloc(z->rrset_count ? z->rrset_count : 1, sizeof(*p.s->at))) ||
        !(p.signer = dnssec_signer_new(65536, true))) {
        snprintf(err, errlen, "zone %s: out of memory", zn);
        goto fail;
    }
    p.s->count = z->rrset_count;
    p.s->inception = now - DNSSEC_INCEPTION_SKEW;
    p.s->expiration = p.s->inception + dz->policy.lifetime;
    p.s->earliest = p.s->expiration;
    bool have_dnskey = false;
    for (size_t i = 0; i < z->node_count; i++) {
        const zone_node_t *n = zone_node_at(z, (uint32_t)i);
        if (n->cut && !(n->flags & ZONE_NODE_CUT))
            continue; /* below a delegation: glue and occluded data are not signed */
        for (unsigned k = 0; k < n->nrrsets; k++) {
            const zone_rrset_t *s = &n->rrsets[k];
            if (n->cut && s->type != WIRE_T_DS)
                continue; /* at a delegation only DS is the parent's data (RFC 4035 §2.2) */
            if (zone_rrset_geo(z, s))
                continue; /* steered: the subset is signed per query */
            if (s->type == WIRE_T_DNSKEY && n == z->apex_node)
                have_dnskey = true;
            if ((rc = reuse_rrset(&p, n, s)) != 0) {
                if (rc > 0)
                    continue;
            } else if (dnssec_ksk_signed(s->type) && n == z->apex_node) {
                rc = sign_rrset(&p, n, s, dz->loader_ksk, dz->nksk);
            } else {
                rc = sign_rrset(&p, n, s, dz->loader_zsk, dz->nzsk);
            }
            if (rc < 0) {
                if (rc == TERN_ENOMEM)
                    snprintf(err, errlen, "zone %s: out of memory", zn);
                goto fail;
            }
        }
    }
    if (!have_dnskey) {
        snprintf(err, errlen, "zone %s: no DNSKEY RRset at the apex to sign", zn);
        rc = TERN_EINVAL;
        goto fail;
    }
    /* the negative-answer SOA is the SOA with a lower TTL: the same signature covers it (the
     * RRSIG keeps the original TTL, RFC 4034 §3.1.4) */
    p.s->at[z->neg_soa - z->rrsets] = p.s->at[z->soa - z->rrsets];
    dnssec_signer_free(p.signer);
    *old = dz->sigs;
    __atomic_store_n(&dz->sigs, p.s, __ATOMIC_RELEASE);
    return 0;
fail:
    dnssec_signer_free(p.signer);
    dnssec_sigs_free(p.s);
    return rc;
}

/* ---- the compact-denial NSEC ---- */

int dnssec_nsec_bitmap(const uint16_t *types, unsigned ntypes, const uint16_t *extra,
                       unsigned nextra, uint8_t *out, size_t cap)
{
    size_t pos = 0;
    unsigned i = 0, j = 0;
    int window = -1;
    size_t wpos = 0; /* where the current window's length octet is */
    while (i < ntypes || j < nextra) {
        uint16_t t;
        if (j >= nextra || (i < ntypes && types[i] < extra[j]))
            t = types[i++];
        else if (i < ntypes && types[i] == extra[j])
            t = types[i++], j++;
        else
            t = extra[j++];
        int w = t >> 8;
        unsigned bit = t & 0xFF;
        if (w != window) {
            if (pos + 2 + 32 > cap)
                return TERN_ENOSPC;
            window = w;
            wpos = pos;
            out[pos] = (uint8_t)w;
            out[pos + 1] = 0;
            memset(out + pos + 2, 0, 32);
            pos += 2;
        }
        unsigned octets = bit / 8 + 1;
        if (octets > out[wpos + 1]) {
            pos = wpos + 2 + octets;
            out[wpos + 1] = (uint8_t)octets;
        }
        out[wpos + 2 + bit / 8] |= (uint8_t)(0x80u >> (bit % 8));
    }
    return (int)pos;
}

int dnssec_nsec_rdata(const uint8_t *owner, const uint16_t *types, unsigned ntypes, bool nxname,
                      uint8_t *out, size_t cap)
{
    size_t olen = dname_len(owner);
    if (olen + 2 > DNAME_MAXLEN || cap < olen + 2)
        return TERN_ENOSPC;
    /* the immediate successor in canonical order: the name with a first label of one 0 octet
     * (RFC 4034 §6.1 ordering; RFC 9824 §3.1) */
    out[0] = 1;
    out[1] = 0;
    (void)dname_lower(out + 2, owner);
    size_t pos = olen + 2;
    /* the types in order: the given ones merged with RRSIG, NSEC and NXNAME */
    static const uint16_t extra[3] = {WIRE_T_RRSIG, WIRE_T_NSEC, DNSSEC_T_NXNAME};
    int n = dnssec_nsec_bitmap(types, ntypes, extra, nxname ? 3 : 2, out + pos, cap - pos);
    return n < 0 ? n : (int)pos + n;
}

/* ---- per-worker signature cache ---- */

typedef struct centry {
    uint64_t key;
    uint64_t gen;
    uint32_t expiration;
    uint16_t siglen;
    uint8_t hdr[DNSSEC_RRSIG_FIXED];
    uint8_t sig[DNSSEC_SIG_MAX];
} centry_t;

/* Entries per set: with 4, a set overflows only when 5 live signatures share it, so a working
 * set up to about half the cache stays whole (2 ways lost a few of 1,000 steered subsets in a
 * 16,384-entry cache to collisions, bench/dnssec.py). */
#define CACHE_WAYS 4

struct dnssec_worker {
    unsigned id;
    uint32_t mask; /* entries - 1 */
    centry_t *e;   /* mmap()ed, bytes long */
    size_t bytes;
    dnssec_signer_t *signer;
    dnssec_worker_stats_t st;
};

dnssec_worker_t *dnssec_worker_new(unsigned id, unsigned entries)
{
    dnssec_worker_t *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    unsigned n = CACHE_WAYS;
    while (n < entries && n < (1u << 24))
        n *= 2;
    w->id = id;
    w->mask = n - 1;
    /* anonymous pages, zero until touched: an entry costs memory once used, and a server
     * without a signed zone pays nothing for the cache (calloc may memset recycled pages) */
    w->bytes = (size_t)n * sizeof(*w->e);
    void *m = mmap(NULL, w->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    w->e = m == MAP_FAILED ? NULL : m;
    /* a steered subset is at most a few KiB of signing data; 64 KiB takes any RRset that fits
     * a DNS message with a short owner */
    w->signer = dnssec_signer_new(65536 + 4096, false);
    if (!w->e || !w->signer) {
        dnssec_worker_free(w);
        return NULL;
    }
    return w;
}

void dnssec_worker_free(dnssec_worker_t *w)
{
    if (!w)
        return;
    dnssec_signer_free(w->signer);
    if (w->e)
        munmap(w->e, w->bytes);
    free(w);
}

void dnssec_worker_stats(const dnssec_worker_t *w, dnssec_worker_stats_t *out)
{
    out->hits = __atomic_load_n(&w->st.hits, __ATOMIC_RELAXED);
    out->misses = __atomic_load_n(&w->st.misses, __ATOMIC_RELAXED);
    out->fails = __atomic_load_n(&w->st.fails, __ATOMIC_RELAXED);
    dnssec_signer_stats(w->signer, &out->sigs, &out->sign_ns);
}

/* The lowercased owner, hashed. */
static uint64_t owner_hash(const uint8_t *owner)
{
    uint8_t lc[DNAME_MAXLEN];
    size_t n = dname_lower(lc, owner);
    return tern_hash64(lc, n, 0x6f776e6572ull);
}

static inline void bump(uint64_t *c)
{
    __atomic_store_n(c, *c + 1, __ATOMIC_RELAXED);
}

int dnssec_online(dnssec_worker_t *w, const dnssec_zone_t *dz, unsigned signer, const zone_t *z,
                  const uint8_t *owner, unsigned labels, uint16_t type, uint32_t ttl,
                  uint16_t count, const uint8_t *rdata, const uint32_t *offs, uint32_t now,
                  uint8_t *out)
{
    /* the RRs as a set: the same subset in another order is the same signature */
    uint64_t set = count;
    if (offs) {
        for (unsigned i = 0; i < count; i++)
            set += tern_mix64(offs[i] + 1u);
    } else {
        /* RDATA outside a zone's RRsets (a synthesised CNAME, an NSEC built per query): its
         * content is the key */
        const uint8_t *p = rdata;
        for (unsigned i = 0; i < count; i++)
            p += 2u + ((size_t)p[0] << 8 | p[1]);
        set = tern_hash64(rdata, (size_t)(p - rdata), set);
    }
    uint64_t key = tern_mix64(dz->gen ^ (uint64_t)signer << 56 ^ (uint64_t)type << 40 ^
                              (uint64_t)labels << 32 ^ ttl);
    key = tern_mix64(key ^ owner_hash(owner));
    key = tern_mix64(key ^ (uint64_t)(uintptr_t)rdata ^ tern_mix64(set));

    size_t alen = z->apex_len;
    centry_t *set0 = &w->e[key & w->mask & ~(uint64_t)(CACHE_WAYS - 1)];
    for (centry_t *e = set0; e < set0 + CACHE_WAYS; e++) {
        if (e->key == key && e->gen == dz->gen &&
            (int32_t)(e->expiration - now) > (int32_t)dz->policy.refresh) {
            memcpy(out, e->hdr, DNSSEC_RRSIG_FIXED);
            memcpy(out + DNSSEC_RRSIG_FIXED, z->apex, alen);
            memcpy(out + DNSSEC_RRSIG_FIXED + alen, e->sig, e->siglen);
            bump(&w->st.hits);
            return (int)(DNSSEC_RRSIG_FIXED + alen + e->siglen);
        }
    }
    bump(&w->st.misses);
    if ((w->id >= dz->nworkers && w->id != DNSSEC_WORKER_CONTROL) || signer >= dz->nzsk) {
        bump(&w->st.fails);
        return TERN_EINVAL;
    }
    unsigned slot = w->id < dz->nworkers ? w->id : dz->nworkers; /* the control thread's last */
    uint32_t inception = now - DNSSEC_INCEPTION_SKEW;
    dnssec_rrsig_req_t req = {
        .owner = owner,
        .labels = labels,
        .type = type,
        .ttl = ttl,
        .inception = inception,
        .expiration = inception + dz->policy.lifetime,
        .signer = z->apex,
    };
    int len = dnssec_sign(w->signer, dz->zsk_ctx[slot * dz->nzsk + signer], &req, count, rdata,
                          offs, out, DNSSEC_RRSIG_MAX);
    if (len < 0) {
        bump(&w->st.fails);
        return len;
    }
    /* the victim: an entry of another zone version (or an empty one) first, else the one
     * that expires soonest — the oldest */
    centry_t *v = set0;
    for (centry_t *e = set0; e < set0 + CACHE_WAYS; e++) {
        if (e->gen != dz->gen) {
            v = e;
            break;
        }
        if ((int32_t)(e->expiration - v->expiration) < 0)
            v = e;
    }
    v->key = key;
    v->gen = dz->gen;
    v->expiration = req.expiration;
    v->siglen = (uint16_t)(len - (int)DNSSEC_RRSIG_FIXED - (int)alen);
    memcpy(v->hdr, out, DNSSEC_RRSIG_FIXED);
    memcpy(v->sig, out + DNSSEC_RRSIG_FIXED + alen, v->siglen);
    return len;
}
