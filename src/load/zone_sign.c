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

static int finish_prepare(const uint8_t *origin, const char *zname, dnssec_key_t **keys,
                          unsigned nkeys, unsigned workers, const dnssec_policy_t *pol,
                          dnssec_zone_t **dz, uint8_t *dnskeys, size_t *len, char *err,
                          size_t errlen)
{
    int rc = dnssec_zone_new(origin, keys, nkeys, workers, pol, dz, err, errlen);
    if (rc < 0)
        return rc;
    rc = dnssec_zone_dnskeys(*dz, dnskeys, ZONE_SIGN_DNSKEYS_MAX);
    if (rc < 0) {
        snprintf(err, errlen, "zone %s: too many keys", zname);
        dnssec_zone_free(*dz);
        *dz = NULL;
        return rc;
    }
    *len = (size_t)rc;
    return 0;
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
    const dnssec_policy_t pol = {.lifetime = cfg->dnssec_lifetime, .refresh = cfg->dnssec_refresh};
    return finish_prepare(origin, cz->origin, keys, n, cfg->workers, &pol, dz, dnskeys, len, err,
                          errlen);
fail:
    for (unsigned i = 0; i < n; i++)
        dnssec_key_free(keys[i]);
    return rc;
}

/* Give k the flags redins gives its role; the tag and label follow the new DNSKEY RDATA. */
static void force_flags(dnssec_key_t *k, uint16_t flags)
{
    if (k->flags == flags)
        return;
    k->flags = flags;
    k->rdata[0] = (uint8_t)(flags >> 8);
    k->rdata[1] = (uint8_t)flags;
    uint16_t old = k->tag;
    k->tag = dnssec_key_tag(k->rdata, k->rdlen);
    /* "...+AAA+TTTTT": the tag is the label's last five digits */
    size_t n = strlen(k->label);
    char tag[8];
    snprintf(tag, sizeof(tag), "%05u", k->tag);
    if (n >= 5)
        memcpy(k->label + n - 5, tag, 5);
    log_debug("dnssec: key tag %u is %u with flags %u (as redins sets them)", old, k->tag, flags);
}

int zone_sign_prepare_redins(const char *origin, const char *const pub[2],
                             const char *const priv[2], const char *const where[2],
                             unsigned workers, const dnssec_policy_t *pol, dnssec_zone_t **dz,
                             uint8_t *dnskeys, size_t *len, char *err, size_t errlen)
{
    uint8_t o[DNAME_MAXLEN];
    *dz = NULL;
    if (dname_from_str(origin, strlen(origin), false, o, NULL) < 0) {
        snprintf(err, errlen, "zone %s: bad origin", origin);
        return TERN_EINVAL;
    }
    /* the KSK first: a listing shows it first, as dnssec_zone_new() finds the ZSK anyway */
    dnssec_key_t *keys[2];
    unsigned n = 0;
    for (int i = 1; i >= 0; i--) {
        char kerr[512];
        int rc = dnssec_key_parse(pub[i], priv[i], where[i], o, &keys[n], kerr, sizeof(kerr));
        if (rc < 0) {
            snprintf(err, errlen, "zone %s: dnssec: %s", origin, kerr);
            for (unsigned k = 0; k < n; k++)
                dnssec_key_free(keys[k]);
            return rc;
        }
        force_flags(keys[n], i == 1 ? DNSSEC_FLAGS_KSK : DNSSEC_FLAGS_ZSK);
        n++;
    }
    return finish_prepare(o, origin, keys, n, workers, pol, dz, dnskeys, len, err, errlen);
}

int zone_sign_attach(zone_t *z, dnssec_zone_t *dz, char *err, size_t errlen)
{
    dnssec_sigs_t *old = NULL;
    int rc = dnssec_zone_sign(dz, z, (uint32_t)time(NULL), &old, err, errlen);
    dnssec_sigs_free(old); /* none: the state is new */
    if (rc < 0) {
        dnssec_zone_free(dz);
        return rc;
    }
    z->dnssec = dz;
    z->dnssec_free = dnssec_zone_free;
    return 0;
}

char *zone_sign_ident(const config_zone_t *cz, const config_t *cfg)
{
    if (!cz->ndnssec_keys)
        return strdup("");
    size_t n = 64;
    for (size_t i = 0; i < cz->ndnssec_keys; i++)
        n += strlen(cz->dnssec_keys[i]) + 1;
    char *s = malloc(n);
    if (!s)
        return NULL;
    size_t pos =
        (size_t)snprintf(s, n, "%u/%u/%u", cfg->dnssec_lifetime, cfg->dnssec_refresh, cfg->workers);
    for (size_t i = 0; i < cz->ndnssec_keys; i++)
        pos += (size_t)snprintf(s + pos, n - pos, "\n%s", cz->dnssec_keys[i]);
    return s;
}
