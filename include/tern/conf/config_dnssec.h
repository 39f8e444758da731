/*
 * config_dnssec.h — the DNSSEC key policies zones may name ("dnssec_policies:", parsed by
 * src/conf/config_dnssec.c into config_t.dnssec_policies) and where their key state lives
 * (config_t.dnssec_state_dir). A zone says `dnssec: {policy: NAME}` (config_zone_t.dnssec_policy)
 * and tern makes, publishes, rolls and retires its keys (tern/dnssec/dnssec_kasp.h; the loader's
 * zone_kasp.c). Here rather than in tern/dnssec: conf sits above the modules it configures.
 *
 * Owner: the config (config_free() frees it). Read-only once loaded.
 */
#ifndef TERN_CONF_CONFIG_DNSSEC_H
#define TERN_CONF_CONFIG_DNSSEC_H

#include <stdbool.h>
#include <stddef.h>

#include "tern/dnssec/dnssec_kasp.h"

/* One named policy; times in seconds (tern/dnssec/dnssec_kasp.h's dnssec_kasp_policy_t). */
typedef struct config_dnssec_policy {
    char *name;
    unsigned algorithm;         /* 8, 13 or 15 */
    bool csk;                   /* one combined key instead of a KSK and a ZSK */
    unsigned rsa_bits;          /* algorithm 8 */
    unsigned ksk_lifetime;      /* 0: rolled only when asked (ternctl dnssec rollover) */
    unsigned zsk_lifetime;      /* 0: the same */
    unsigned propagation_delay; /* until every secondary has a change */
    unsigned dnskey_ttl;        /* TTL of DNSKEY, CDS and CDNSKEY */
    unsigned parent_ds_ttl;     /* TTL of the zone's DS at its parent */
    unsigned zone_max_ttl;      /* the zone's largest TTL the waits count on; 0: as built */
    bool cds;                   /* publish CDS/CDNSKEY for the parent (RFC 7344) */
    unsigned cds_digest;        /* 2 (SHA-256) or 4 (SHA-384) */
    char **parents;             /* "ADDR" or "ADDR@PORT": the parent's servers asked for the DS
                                   of a new KSK; none: ternctl dnssec ds-seen says it */
    size_t nparents;
    unsigned ds_check_interval;  /* seconds between those questions */
    unsigned signature_lifetime; /* seconds its zones' signatures are valid; 0: dnssec_lifetime */
    unsigned signature_refresh;  /* re-sign when less remains; 0: dnssec_refresh */
} config_dnssec_policy_t;

struct config;

/** The signature lifetime and refresh of policy p's zones (p NULL: of zones with static keys):
 * the policy's, else the server's dnssec_lifetime and dnssec_refresh. */
void config_dnssec_signatures(const struct config *c, const config_dnssec_policy_t *p,
                              unsigned *lifetime, unsigned *refresh);

/** The policy of that name, or NULL. */
const config_dnssec_policy_t *config_dnssec_policy_find(const struct config *c, const char *name);

/** p as the key-state machine takes it (zone_max_ttl left at its default: the caller's). */
void config_dnssec_policy_kasp(const config_dnssec_policy_t *p, dnssec_kasp_policy_t *out);

/**
 * Where the key state of zones with a policy lives: c->dnssec_state_dir, else
 * "$STATE_DIRECTORY/dnssec" when systemd gives ternd a state directory (the first of a list);
 * NULL when neither (buf, len bytes, holds the default; NULL too when it does not fit).
 */
const char *config_dnssec_state_dir(const struct config *c, char *buf, size_t len);

#endif
