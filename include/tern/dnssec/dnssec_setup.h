/*
 * dnssec_setup.h — making a zone's signing state from keys already read, and signing a built
 * zone with it: the steps every zone source that signs shares (the loader's zone files with
 * BIND key files, tern/load's zone_sign.h; Redis zones with redins' key strings).
 *
 * Order: keys read (dnssec_key.h) → dnssec_setup_keys() (the state and the DNSKEY RDATAs the
 * zone builder adds at the apex) → the zone built → dnssec_setup_attach() (every static RRset
 * signed, the state owned by the zone from then on). Every error names the zone and the key or
 * RRset; the caller fails the zone's load, so its previous version keeps serving.
 *
 * Threading: whichever control thread builds the zone (the loader's, the Redis reader's);
 * nothing is shared.
 */
#ifndef TERN_DNSSEC_DNSSEC_SETUP_H
#define TERN_DNSSEC_DNSSEC_SETUP_H

#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/dnssec/dnssec_zone.h"
#include "tern/zone/zone.h"

/* Room for the apex records of every key of a zone (a zone has a handful): DNSKEY, and CDS
 * (SHA-384 at most) and CDNSKEY for the ones the parent is to take. */
#define DNSSEC_SETUP_DNSKEYS_MAX (16 * (3 * 4 + 2 * DNSSEC_KEY_RDATA_MAX + 4 + 48))

/**
 * The signing state of zone origin (wire) from keys[0..nkeys) (taken over: freed on failure
 * too) for workers and pol; zname names the zone in messages. On success *dz is the state and
 * dnskeys[0..*len) the DNSKEY RDATA sequence for the builder (dnskeys holds
 * DNSSEC_SETUP_DNSKEYS_MAX bytes).
 */
int dnssec_setup_keys(const uint8_t *origin, const char *zname, dnssec_key_t **keys, unsigned nkeys,
                      unsigned workers, const dnssec_policy_t *pol, dnssec_zone_t **dz,
                      uint8_t *dnskeys, size_t *len, char *err, size_t errlen) TERN_WUR;

/**
 * The same from redins' Redis layout: pub[0]/priv[0] the ZSK strings, pub[1]/priv[1] the KSK's
 * (all four given); where[i] names their keys in messages. As redins does, the ZSK is given
 * flags 256 and the KSK 257 whatever their text says (the key tag follows).
 */
int dnssec_setup_redins(const char *origin, const char *const pub[2], const char *const priv[2],
                        const char *const where[2], unsigned workers, const dnssec_policy_t *pol,
                        dnssec_zone_t **dz, uint8_t *dnskeys, size_t *len, char *err,
                        size_t errlen) TERN_WUR;

/** Sign z with dz (taken over: freed on failure too) and attach it to z; with its export
 * (dnssec_export.h) when dz's policy says so. prev: the zone's previous version, whose
 * signatures of unchanged data are taken over (dnssec_zone_sign_from()), or NULL. */
int dnssec_setup_attach(zone_t *z, dnssec_zone_t *dz, const zone_t *prev, char *err,
                        size_t errlen) TERN_WUR;

#endif
