/*
 * zone_sign.h — private to src/load: what the loader does for a zone tern signs (DNSSEC).
 *
 * Before the zone is read: its keys are loaded (BIND files named in ternd.yaml, or redins' keys
 * from Redis) and its signing state is made (tern/dnssec/dnssec_zone.h), whose DNSKEYs the zone
 * builder adds at the apex. After it is built: every static RRset is signed and the state is
 * attached to the zone, which owns it from then on. Every error names the zone and the key or
 * RRset; the caller fails the load, so the previous version keeps serving.
 *
 * Loader thread (file zones) or the Redis source's thread (Redis zones); nothing is shared.
 */
#ifndef TERN_LOAD_ZONE_SIGN_H
#define TERN_LOAD_ZONE_SIGN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "tern/common/compiler.h"
#include "tern/conf/config.h"
#include "tern/dnssec/dnssec_zone.h"
#include "tern/zone/zone.h"

/* Room for the DNSKEY RDATA of every key of a zone (a zone has a handful). */
#define ZONE_SIGN_DNSKEYS_MAX (16 * (2 + DNSSEC_KEY_RDATA_MAX))

typedef int (*zone_sign_seen_fn)(void *ctx, const char *path, const struct stat *st);

/**
 * Load the key files of cz (each stem's .key and .private; seen, if not NULL, is told of every
 * file read, so a changed key file reloads the zone) and make the signing state for cfg's
 * workers and policy. On success *dz is the state and dnskeys[0..*len) the DNSKEY rdata sequence
 * for the builder.
 */
int zone_sign_prepare(const config_zone_t *cz, const config_t *cfg, zone_sign_seen_fn seen,
                      void *seen_ctx, dnssec_zone_t **dz, uint8_t *dnskeys, size_t *len, char *err,
                      size_t errlen) TERN_WUR;

/**
 * The same from redins' Redis layout: pub[0]/priv[0] the ZSK strings, pub[1]/priv[1] the KSK's
 * (all four given); where[i] names their keys in messages. As redins does, the ZSK is given
 * flags 256 and the KSK 257 whatever their text says (the key tag follows).
 */
int zone_sign_prepare_redins(const char *origin, const char *const pub[2],
                             const char *const priv[2], const char *const where[2],
                             unsigned workers, const dnssec_policy_t *pol, dnssec_zone_t **dz,
                             uint8_t *dnskeys, size_t *len, char *err, size_t errlen) TERN_WUR;

/** Sign z with dz (taken over: freed on failure too) and attach it to z. */
int zone_sign_attach(zone_t *z, dnssec_zone_t *dz, char *err, size_t errlen) TERN_WUR;

/** What identifies cz's signing setup (keys, lifetime, refresh, workers) for "is the zone
 * unchanged": a malloc'd string, "" for an unsigned zone; NULL when out of memory. */
char *zone_sign_ident(const config_zone_t *cz, const config_t *cfg);

#endif
