/*
 * zone_sign.h — private to src/load: the config's side of signing a zone (DNSSEC): the key
 * files ternd.yaml names and the policy it sets, made into a signing state by
 * tern/dnssec/dnssec_setup.h (which the Redis reader uses with redins' key strings), and what
 * identifies that setup for "is the zone unchanged".
 *
 * Loader thread; nothing is shared.
 */
#ifndef TERN_LOAD_ZONE_SIGN_H
#define TERN_LOAD_ZONE_SIGN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "tern/common/compiler.h"
#include "tern/conf/config.h"
#include "tern/dnssec/dnssec_setup.h"
#include "tern/zone/zone.h"

typedef int (*zone_sign_seen_fn)(void *ctx, const char *path, const struct stat *st);

/**
 * Load the key files of cz (each stem's .key and .private; seen, if not NULL, is told of every
 * file read, so a changed key file reloads the zone) and make the signing state for cfg's
 * workers and policy (dnssec_setup_keys()). On success *dz is the state and dnskeys[0..*len) the
 * DNSKEY rdata sequence for the builder (DNSSEC_SETUP_DNSKEYS_MAX bytes); the zone, once built,
 * is signed with dnssec_setup_attach().
 */
int zone_sign_prepare(const config_zone_t *cz, const config_t *cfg, zone_sign_seen_fn seen,
                      void *seen_ctx, dnssec_zone_t **dz, uint8_t *dnskeys, size_t *len, char *err,
                      size_t errlen) TERN_WUR;

struct zone_kasp; /* zone_kasp.h */

/**
 * The same for a zone whose keys tern manages (cz->dnssec_policy; key: its canonical key): its
 * key state stepped to now by k (zone_kasp_prepare()), the keys and roles of its plan made
 * into the signing state. *dz NULL (and 0): the plan serves the zone unsigned.
 */
int zone_sign_prepare_policy(struct zone_kasp *k, const char *key, const config_zone_t *cz,
                             const config_t *cfg, dnssec_zone_t **dz, uint8_t *dnskeys, size_t *len,
                             char *err, size_t errlen) TERN_WUR;

/** What identifies cz's signing setup (keys, lifetime, refresh, workers) for "is the zone
 * unchanged": a malloc'd string, "" for an unsigned zone; NULL when out of memory. */
char *zone_sign_ident(const config_zone_t *cz, const config_t *cfg);

#endif
