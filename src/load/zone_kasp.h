/*
 * zone_kasp.h — private to src/load: the zones whose keys tern manages (dnssec: {policy: NAME}):
 * for each, its key-state machine (tern/dnssec/dnssec_kasp.h), its state file and its key
 * files, turned into the keys and roles a build signs with.
 *
 * On disk, under the state directory (config_dnssec_state_dir()): <zone>.kasp, the key state
 * (saved atomically after every change, so a restart resumes a rollover where it was), and
 * keys/K<zone>.+<alg>+<tag>.{key,private}, the keys tern generated (BIND's format: `ternctl
 * dnssec ds` and BIND's tools read them).
 *
 * Each build of such a zone steps its state to now (zone_kasp_prepare()): keys the plan asks for
 * are generated, the events that are due happen (logged, one line each), and the plan says which
 * keys are in DNSKEY, which sign what and whose CDS/CDNSKEY are published. The zone's next event
 * is when the loader must build it again (zone_kasp_due(), zone_kasp_next()). The operator's
 * requests (ternctl dnssec rollover, ds-seen) change the state at once and ask for that build.
 *
 * Threading: the loader thread prepares; the control thread reads the status and makes requests.
 * One mutex guards the registry; it is held for a step, a state save (an fsync) or a copy, never
 * while a zone is built or signed.
 */
#ifndef TERN_LOAD_ZONE_KASP_H
#define TERN_LOAD_ZONE_KASP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/conf/config.h"
#include "tern/dnssec/dnssec_kasp_keys.h"
#include "tern/dnssec/dnssec_key.h"
#include "tern/load/loader.h"
#include "tern/zone/zone.h"

typedef struct zone_kasp zone_kasp_t;

/* What a build of a managed zone signs with (shared with Redis zones: dnssec_kasp_keys.h). */
#define ZONE_KASP_KEYS_MAX DNSSEC_KASP_KEYS_USED_MAX
typedef dnssec_kasp_keys_t zone_kasp_keys_t;

zone_kasp_t *zone_kasp_new(void) TERN_WUR;

struct ds_check; /* ds_check.h */

/** The checker that asks parents for the DS a zone waits for (the loader's; before the first
 * prepare). */
void zone_kasp_set_checker(zone_kasp_t *k, struct ds_check *dc);
void zone_kasp_free(zone_kasp_t *k);

/**
 * Step configured zone cz (key: its canonical key; cz->dnssec_policy names a policy of cfg) to
 * now, generating the keys its plan asks for, save its state, and load the keys it signs with
 * into *out. Errors name the zone, the file and what (a state file that does not parse, a key
 * file gone, a policy its zone's TTLs make impossible); the zone's previous version then keeps
 * serving.
 */
int zone_kasp_prepare(zone_kasp_t *k, const char *key, const config_zone_t *cz, const config_t *cfg,
                      int64_t now, zone_kasp_keys_t *out, char *err, size_t errlen) TERN_WUR;

/** After a build of managed zone key: its largest TTL, for the rollovers' waits when the policy
 * does not set zone_max_ttl. */
void zone_kasp_built(zone_kasp_t *k, const char *key, const zone_t *z);

/** The earliest next event of every managed zone (0: none). */
int64_t zone_kasp_next(zone_kasp_t *k);

/** Call fn for each managed zone whose next event is due at now. */
void zone_kasp_due(zone_kasp_t *k, int64_t now, void (*fn)(void *ctx, const char *key), void *ctx);

/** Forget the zones cfg no longer manages (loader thread, after a reload). */
void zone_kasp_retain(zone_kasp_t *k, const config_t *cfg);

/**
 * `ternctl dnssec status [ZONE]`: the status text of zone key (NULL: every managed zone), a
 * malloc'd string; NULL with err set when no such zone is managed or out of memory.
 */
char *zone_kasp_status(zone_kasp_t *k, const char *key, char *err, size_t errlen);

/**
 * loader_dnssec_keys() (tern/load/loader.h): a copy, under the mutex, of the counts each zone's
 * last step recorded. 0 and *out (one block the caller frees) or TERN_ENOMEM.
 */
int zone_kasp_gauges(zone_kasp_t *k, loader_dnssec_keys_t **out, size_t *n) TERN_WUR;

/** `ternctl dnssec rollover ZONE ksk|zsk|csk`: start one now (the caller asks for the build).
 * 0, or a negative code with the reason in err. */
int zone_kasp_rollover(zone_kasp_t *k, const char *key, const char *role, int64_t now, char *err,
                       size_t errlen) TERN_WUR;

/** `ternctl dnssec ds-seen ZONE [TAG]` (by_operator), or the checker: the DS of the KSK with
 * that tag (-1: every KSK whose DS is wanted) is at the parent. 0, or a negative code with the
 * reason in err. */
int zone_kasp_ds_seen(zone_kasp_t *k, const char *key, int tag, int64_t now, bool by_operator,
                      char *err, size_t errlen) TERN_WUR;

/** `ternctl dnssec ds-gone ZONE`, or the checker (by_operator false): the parent no longer has
 * a DS for the zone being unsigned; its keys go parent DS TTL + propagation delay later. 0, or a
 * negative code with the reason in err (the zone is not being unsigned). */
int zone_kasp_ds_gone(zone_kasp_t *k, const char *key, int64_t now, bool by_operator, char *err,
                      size_t errlen) TERN_WUR;

/** True while zone key's managed keys are in use (published or signing): such a zone must be
 * unsigned (dnssec: {policy, unsign: true}) before its policy may go from the config. */
bool zone_kasp_signing(zone_kasp_t *k, const char *key);

#endif
