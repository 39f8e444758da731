/*
 * dnssec_kasp_keys.c — see dnssec_kasp_keys.h.
 */
#include "tern/dnssec/dnssec_kasp_keys.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/dnssec/dnssec_zone.h"

/* A generated key whose tag collides with a live key's is made again: 1 in 65536 per try, so
 * eight tries fail only when something else is wrong. */
#define GENERATE_TRIES 8

/* A step asks for at most a set (KSK + ZSK) and then steps again; an algorithm rollover during
 * another needs one more round. Four rounds end any plan. */
#define STEP_ROUNDS 4

/* Make the keys the plan asks for, keep them in store, and register them in st. */
static int generate(dnssec_kasp_t *st, const char *zname, const uint8_t *origin,
                    const dnssec_kasp_store_t *store, const dnssec_kasp_plan_t *plan, int64_t now,
                    char *err, size_t errlen)
{
    for (size_t i = 0; i < plan->ngenerate; i++) {
        const dnssec_kasp_generate_t *g = &plan->generate[i];
        char kerr[256], id[DNSSEC_KASP_ID_MAX + 1];
        int rc = TERN_EEXIST;
        for (int tries = 0; tries < GENERATE_TRIES && rc == TERN_EEXIST; tries++) {
            dnssec_key_t *key = NULL;
            bool ksk = g->role != DNSSEC_KASP_ZSK;
            rc = dnssec_key_generate(origin, g->alg, ksk, g->rsa_bits, &key, kerr, sizeof(kerr));
            if (rc == 0)
                rc = store->put(store->ctx, key, id, sizeof(id), kerr, sizeof(kerr));
            if (rc == 0) {
                rc =
                    dnssec_kasp_add_key(st, g->role, g->alg, key->tag, id, now, kerr, sizeof(kerr));
                if (rc == 0)
                    log_info("dnssec: zone %s: %s %u (algorithm %u) generated: %s", zname,
                             dnssec_kasp_role_name(g->role), key->tag, g->alg, id);
            }
            dnssec_key_free(key);
        }
        if (rc < 0) {
            snprintf(err, errlen, "zone %s: dnssec: cannot make a %s: %s", zname,
                     dnssec_kasp_role_name(g->role), kerr);
            return rc;
        }
    }
    return 0;
}

int dnssec_kasp_keys_step(dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol, const char *zname,
                          const uint8_t *origin, int64_t now, const dnssec_kasp_store_t *store,
                          dnssec_kasp_plan_t *plan, bool *changed, char *err, size_t errlen)
{
    *changed = false;
    for (int round = 0; round < STEP_ROUNDS; round++) {
        int rc = dnssec_kasp_step(st, pol, now, plan);
        if (rc < 0) {
            char why[256];
            if (dnssec_kasp_policy_check(pol, why, sizeof(why)) < 0)
                snprintf(err, errlen, "zone %s: dnssec: %s", zname, why);
            else
                snprintf(err, errlen, "zone %s: dnssec: %s", zname, tern_strerror(rc));
            return rc;
        }
        for (size_t i = 0; i < plan->nlog; i++) {
            if (store)
                log_info("dnssec: zone %s: %s", zname, plan->log[i]);
            else
                log_debug("dnssec: zone %s: %s (as the driving node will)", zname, plan->log[i]);
        }
        *changed = *changed || plan->nlog || (store && plan->ngenerate);
        if (!plan->ngenerate || !store)
            break;
        if ((rc = generate(st, zname, origin, store, plan, now, err, errlen)) < 0)
            return rc;
    }
    return 0;
}

int dnssec_kasp_keys_load(const dnssec_kasp_plan_t *plan, const dnssec_kasp_policy_t *pol,
                          const char *zname, const dnssec_kasp_store_t *store,
                          dnssec_kasp_keys_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    out->cds_digest = pol->publish_cds ? pol->cds_digest : 0;
    out->cds_delete = plan->cds_delete;
    if (plan->unsigned_zone)
        return 0;
    for (size_t i = 0; i < plan->nkeys; i++) {
        const dnssec_kasp_plan_key_t *p = &plan->keys[i];
        if (!p->in_dnskey && !p->signs_dnskey && !p->signs_zone && !p->in_cds)
            continue;
        if (out->n == DNSSEC_KASP_KEYS_USED_MAX) {
            snprintf(err, errlen, "zone %s: dnssec: more than %d keys in use", zname,
                     DNSSEC_KASP_KEYS_USED_MAX);
            dnssec_kasp_keys_release(out);
            return TERN_ELIMIT;
        }
        char kerr[512];
        int rc = store->get(store->ctx, p->id, &out->keys[out->n], kerr, sizeof(kerr));
        if (rc < 0) {
            snprintf(err, errlen, "zone %s: dnssec: key %s %u: %s", zname,
                     dnssec_kasp_role_name(p->role), p->tag, kerr);
            dnssec_kasp_keys_release(out);
            return rc;
        }
        out->roles[out->n++] = (uint8_t)((p->in_dnskey ? DNSSEC_ROLE_PUBLISH : 0) |
                                         (p->signs_dnskey ? DNSSEC_ROLE_SIGN_DNSKEY : 0) |
                                         (p->signs_zone ? DNSSEC_ROLE_SIGN_ZONE : 0) |
                                         (p->in_cds && pol->publish_cds ? DNSSEC_ROLE_CDS : 0));
    }
    return 0;
}

size_t dnssec_kasp_keys_ds(const dnssec_kasp_plan_t *plan, const dnssec_kasp_policy_t *pol,
                           const char *zname, const dnssec_kasp_store_t *store,
                           dnssec_kasp_ds_t out[DNSSEC_KASP_DS_MAX])
{
    memset(out, 0, DNSSEC_KASP_DS_MAX * sizeof(*out)); /* gone false: these are wanted */
    size_t n = 0;
    for (size_t i = 0; i < plan->nds_wanted && n < DNSSEC_KASP_DS_MAX; i++)
        for (size_t j = 0; j < plan->nkeys; j++) {
            const dnssec_kasp_plan_key_t *p = &plan->keys[j];
            if (p->tag != plan->ds_wanted[i] || p->role == DNSSEC_KASP_ZSK)
                continue;
            char kerr[256];
            dnssec_key_t *key = NULL;
            if (store->get(store->ctx, p->id, &key, kerr, sizeof(kerr)) < 0) {
                log_err("dnssec: zone %s: %s; its DS is not looked for", zname, kerr);
                break;
            }
            int dl = dnssec_key_ds(key, pol->cds_digest, out[n].rdata, sizeof(out[n].rdata));
            dnssec_key_free(key);
            if (dl > 0) {
                out[n].tag = plan->ds_wanted[i];
                out[n].len = (uint16_t)dl;
                n++;
            }
            break;
        }
    return n;
}

int dnssec_kasp_keys_role(const char *name, dnssec_kasp_role_t *out, char *err, size_t errlen)
{
    static const struct {
        const char *name;
        dnssec_kasp_role_t role;
    } roles[] = {{"ksk", DNSSEC_KASP_KSK}, {"zsk", DNSSEC_KASP_ZSK}, {"csk", DNSSEC_KASP_CSK}};
    for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
        if (strcasecmp(name, roles[i].name) == 0) {
            *out = roles[i].role;
            return 0;
        }
    snprintf(err, errlen, "rollover: expected ksk, zsk or csk, got \"%s\"", name);
    return TERN_EINVAL;
}

void dnssec_kasp_keys_release(dnssec_kasp_keys_t *out)
{
    for (unsigned i = 0; i < out->n; i++)
        dnssec_key_free(out->keys[i]);
    out->n = 0;
}

dnssec_kasp_unsign_step_t dnssec_kasp_keys_unsign_step(const dnssec_kasp_t *st, bool unsign)
{
    int64_t gone;
    bool unsigning = dnssec_kasp_unsigning(st, &gone) != 0, in_use = dnssec_kasp_in_use(st);
    if (unsign)
        return unsigning ? DNSSEC_KASP_UNSIGN_NOTHING
               : in_use  ? DNSSEC_KASP_UNSIGN_START
                         : DNSSEC_KASP_UNSIGN_NO_KEYS;
    if (!unsigning)
        return DNSSEC_KASP_UNSIGN_NOTHING;
    return in_use ? DNSSEC_KASP_UNSIGN_REFUSED : DNSSEC_KASP_UNSIGN_AFRESH;
}

int dnssec_kasp_keys_unsign(dnssec_kasp_t **st, dnssec_kasp_unsign_step_t step, const char *zname,
                            const char *setting, int64_t now, bool *changed, char *err,
                            size_t errlen)
{
    char why[256];
    switch (step) {
    case DNSSEC_KASP_UNSIGN_START:
        if (dnssec_kasp_unsign(*st, now, why, sizeof(why)) < 0) {
            snprintf(err, errlen, "zone %s: dnssec: cannot unsign: %s", zname, why);
            return TERN_EINVAL;
        }
        log_info("dnssec: zone %s: unsigning (RFC 8078): CDS/CDNSKEY DELETE published; the keys "
                 "go once the parent's DS is gone",
                 zname);
        *changed = true;
        return 0;
    case DNSSEC_KASP_UNSIGN_AFRESH: {
        dnssec_kasp_t *fresh = dnssec_kasp_new();
        if (!fresh) {
            snprintf(err, errlen, "zone %s: out of memory", zname);
            return TERN_ENOMEM;
        }
        dnssec_kasp_free(*st);
        *st = fresh;
        *changed = true;
        log_info("dnssec: zone %s: unsigned before, signed again from scratch", zname);
        return 0;
    }
    case DNSSEC_KASP_UNSIGN_REFUSED:
        snprintf(err, errlen,
                 "zone %s: dnssec: it is being unsigned (CDS DELETE published): keep %s until "
                 "`ternctl dnssec status` shows no key in use",
                 zname, setting);
        return TERN_EINVAL;
    default:
        return 0;
    }
}
