/*
 * zone_sign.c — see zone_sign.h.
 */
#include "zone_sign.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern/common/err.h"
#include "tern/common/log.h"

#include "zone_kasp.h"

/* The signature policy of cz's signing state: its key policy's lifetimes, else cfg's; an
 * export when secondaries transfer it (tern/dnssec/dnssec_export.h). */
static dnssec_policy_t sig_policy(const config_zone_t *cz, const config_t *cfg)
{
    unsigned life, refresh;
    config_dnssec_signatures(cfg, config_dnssec_policy_find(cfg, cz->dnssec_policy), &life,
                             &refresh);
    return (dnssec_policy_t){
        .lifetime = life, .refresh = refresh, .export = cz->nnotify || cz->allow_transfer.n};
}

int zone_sign_prepare(const config_zone_t *cz, const config_t *cfg, zone_sign_seen_fn seen,
                      void *seen_ctx, dnssec_zone_t **dz, uint8_t *dnskeys, size_t *len, char *err,
                      size_t errlen)
{
    uint8_t origin[DNAME_MAXLEN];
    *dz = NULL;
    if (dname_from_str(cz->origin, strlen(cz->origin), false, origin, NULL) < 0) {
        snprintf(err, errlen, "zone %s: bad origin", cz->origin);
        return TERN_EINVAL;
    }
    if (cz->ndnssec_keys > 16) {
        snprintf(err, errlen, "zone %s: dnssec: at most 16 keys", cz->origin);
        return TERN_ELIMIT;
    }
    dnssec_key_t *keys[16];
    unsigned n = 0;
    int rc = 0;
    for (size_t i = 0; i < cz->ndnssec_keys; i++) {
        char kerr[512];
        rc = dnssec_key_load(cz->dnssec_keys[i], origin, &keys[n], kerr, sizeof(kerr));
        if (rc < 0) {
            snprintf(err, errlen, "zone %s: dnssec: %s", cz->origin, kerr);
            goto fail;
        }
        n++;
        if (seen) {
            char pub[4096], priv[4096];
            struct stat st;
            if (dnssec_key_paths(cz->dnssec_keys[i], pub, priv, sizeof(pub)) < 0)
                continue; /* cannot be: it was just read */
            if ((stat(pub, &st) == 0 && (rc = seen(seen_ctx, pub, &st)) < 0) ||
                (stat(priv, &st) == 0 && (rc = seen(seen_ctx, priv, &st)) < 0)) {
                snprintf(err, errlen, "zone %s: out of memory", cz->origin);
                goto fail;
            }
        }
    }
    const dnssec_policy_t pol = sig_policy(cz, cfg);
    return dnssec_setup_keys(origin, cz->origin, keys, n, cfg->workers, &pol, dz, dnskeys, len, err,
                             errlen);
fail:
    for (unsigned i = 0; i < n; i++)
        dnssec_key_free(keys[i]);
    return rc;
}

int zone_sign_prepare_policy(struct zone_kasp *k, const char *key, const config_zone_t *cz,
                             const config_t *cfg, dnssec_zone_t **dz, uint8_t *dnskeys, size_t *len,
                             char *err, size_t errlen)
{
    uint8_t origin[DNAME_MAXLEN];
    zone_kasp_keys_t kk;
    *dz = NULL;
    *len = 0;
    if (dname_from_str(cz->origin, strlen(cz->origin), false, origin, NULL) < 0) {
        snprintf(err, errlen, "zone %s: bad origin", cz->origin);
        return TERN_EINVAL;
    }
    int rc = zone_kasp_prepare(k, key, cz, cfg, (int64_t)time(NULL), &kk, err, errlen);
    if (rc < 0 || kk.n == 0)
        return rc;
    const dnssec_policy_t pol = sig_policy(cz, cfg);
    rc = dnssec_zone_new_roles(origin, kk.keys, kk.roles, kk.n, kk.cds_digest, kk.cds_delete,
                               cfg->workers, &pol, dz, err, errlen); /* takes the keys */
    if (rc < 0)
        return rc;
    rc = dnssec_zone_dnskeys(*dz, dnskeys, DNSSEC_SETUP_DNSKEYS_MAX);
    if (rc < 0) {
        snprintf(err, errlen, "zone %s: too many keys", cz->origin);
        dnssec_zone_free(*dz);
        *dz = NULL;
        return rc;
    }
    *len = (size_t)rc;
    return 0;
}

char *zone_sign_ident(const config_zone_t *cz, const config_t *cfg)
{
    const config_dnssec_policy_t *p = config_dnssec_policy_find(cfg, cz->dnssec_policy);
    if (p) {
        char *s = NULL;
        /* a policy's every setting: a changed one builds the zone again */
        unsigned life, refresh;
        config_dnssec_signatures(cfg, p, &life, &refresh);
        if (asprintf(&s, "policy %s/%u/%d/%u/%u/%u/%u/%u/%u/%u/%d/%u/%d %u/%u/%u/%d", p->name,
                     p->algorithm, p->csk, p->rsa_bits, p->ksk_lifetime, p->zsk_lifetime,
                     p->propagation_delay, p->dnskey_ttl, p->parent_ds_ttl, p->zone_max_ttl, p->cds,
                     p->cds_digest, cz->dnssec_unsign, life, refresh, cfg->workers,
                     cz->nnotify || cz->allow_transfer.n) < 0)
            return NULL;
        return s;
    }
    if (!cz->ndnssec_keys)
        return strdup("");
    size_t n = 64;
    for (size_t i = 0; i < cz->ndnssec_keys; i++)
        n += strlen(cz->dnssec_keys[i]) + 1;
    char *s = malloc(n);
    if (!s)
        return NULL;
    size_t pos = (size_t)snprintf(s, n, "%u/%u/%u/%d", cfg->dnssec_lifetime, cfg->dnssec_refresh,
                                  cfg->workers, cz->nnotify || cz->allow_transfer.n);
    for (size_t i = 0; i < cz->ndnssec_keys; i++)
        pos += (size_t)snprintf(s + pos, n - pos, "\n%s", cz->dnssec_keys[i]);
    return s;
}
