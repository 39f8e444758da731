/*
 * dnssec_setup.c — see dnssec_setup.h.
 */
#include "tern/dnssec/dnssec_setup.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/log.h"
#include "tern/dnssec/dnssec_export.h"
#include "tern/wire/dname.h"

int dnssec_setup_keys(const uint8_t *origin, const char *zname, dnssec_key_t **keys, unsigned nkeys,
                      unsigned workers, const dnssec_policy_t *pol, dnssec_zone_t **dz,
                      uint8_t *dnskeys, size_t *len, char *err, size_t errlen)
{
    int rc = dnssec_zone_new(origin, keys, nkeys, workers, pol, dz, err, errlen);
    if (rc < 0)
        return rc;
    rc = dnssec_zone_dnskeys(*dz, dnskeys, DNSSEC_SETUP_DNSKEYS_MAX);
    if (rc < 0) {
        snprintf(err, errlen, "zone %s: too many keys", zname);
        dnssec_zone_free(*dz);
        *dz = NULL;
        return rc;
    }
    *len = (size_t)rc;
    return 0;
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

int dnssec_setup_redins(const char *origin, const char *const pub[2], const char *const priv[2],
                        const char *const where[2], unsigned workers, const dnssec_policy_t *pol,
                        dnssec_zone_t **dz, uint8_t *dnskeys, size_t *len, char *err, size_t errlen)
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
    return dnssec_setup_keys(o, origin, keys, n, workers, pol, dz, dnskeys, len, err, errlen);
}

int dnssec_setup_attach(zone_t *z, dnssec_zone_t *dz, const zone_t *prev, char *err, size_t errlen)
{
    dnssec_sigs_t *old = NULL;
    int64_t t0 = tern_monotonic_ms();
    int rc = dnssec_zone_sign_from(dz, z, prev, (uint32_t)time(NULL), &old, err, errlen);
    dnssec_sigs_free(old); /* none: the state is new */
    if (rc == 0 && dz->policy.export)
        rc = dnssec_export_make(dz, z, prev, &dz->export, err, errlen);
    if (rc < 0) {
        dnssec_zone_free(dz);
        return rc;
    }
    /* what a change or a key event cost to sign: made anew, taken over (bench/dnssec_keys.py) */
    const dnssec_sigs_t *sg = dnssec_zone_sigs(dz);
    char zn[DNAME_MAXLEN * 4 + 1];
    dnssec_name_text(z->apex, zn, sizeof(zn));
    log_debug("dnssec: zone %s serial %u: %" PRIu64 " signatures made, %" PRIu64
              " taken over%s; export %" PRIu64 " made, %" PRIu64 " taken over; %" PRId64 " ms",
              zn, z->serial, sg->made, sg->reused, dz->export ? "" : " (no export)",
              dz->export ? dz->export->made : 0, dz->export ? dz->export->reused : 0,
              tern_monotonic_ms() - t0);
    z->dnssec = dz;
    z->dnssec_free = dnssec_zone_free;
    return 0;
}
