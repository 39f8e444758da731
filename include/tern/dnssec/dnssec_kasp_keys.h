/*
 * dnssec_kasp_keys.h — a managed zone's keys between its key-state machine (dnssec_kasp.h) and
 * its signing state: the step that makes the keys a plan asks for, and the plan turned into the
 * keys and roles a build signs with (dnssec_zone_new_roles()).
 *
 * Where the keys are kept is the caller's, behind dnssec_kasp_store_t: a directory of BIND files
 * (file zones, tern/load's zone_kasp) or a Redis hash beside redins' layout (Redis zones,
 * src/redis/redis_kasp.c). Both run the same step and the same plan-to-keys mapping here, so a
 * zone is signed the same way whichever source it comes from.
 *
 * Lifecycle: none of its own; the caller owns the state, the plan and the keys it gets.
 * Threading: the caller's thread (the loader's, a Redis source's); nothing shared.
 */
#ifndef TERN_DNSSEC_DNSSEC_KASP_KEYS_H
#define TERN_DNSSEC_DNSSEC_KASP_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/dnssec/dnssec_kasp.h"
#include "tern/dnssec/dnssec_key.h"

/* At most this many keys take part in a zone's signing at once (an algorithm rollover during a
 * KSK and a ZSK rollover has 8). */
#define DNSSEC_KASP_KEYS_USED_MAX 16

/* What a build of a managed zone signs with. */
typedef struct dnssec_kasp_keys {
    dnssec_key_t *keys[DNSSEC_KASP_KEYS_USED_MAX]; /* the caller's (dnssec_zone_new_roles() takes
                                                      them) */
    uint8_t roles[DNSSEC_KASP_KEYS_USED_MAX];      /* DNSSEC_ROLE_* */
    unsigned n;                                    /* 0: the zone is served unsigned */
    unsigned cds_digest;                           /* 0: no CDS */
    bool cds_delete;
} dnssec_kasp_keys_t;

/* A DS a zone waits for at its parent: its key's tag and the DS RDATA (the policy's digest, as
 * its CDS gives it), for a checker that asks the parent's servers (tern/load's ds_check). */
typedef struct dnssec_kasp_ds {
    uint16_t tag;
    uint16_t len;
    uint8_t rdata[4 + 64];
    bool gone; /* instead: the zone's whole DS RRset is to be gone (unsigning; tag, rdata unused) */
} dnssec_kasp_ds_t;

/* At most this many DS are waited for at once (a KSK rollover during an algorithm rollover). */
#define DNSSEC_KASP_DS_MAX 4

/* Where a zone's generated keys live. */
typedef struct dnssec_kasp_store {
    /* Keep key (just generated, with its private key) and write the id it is known by (at most
     * DNSSEC_KASP_ID_MAX characters, no blank or '=') into id. 0; TERN_EEXIST when that id is
     * taken (the caller makes another key); another negative code with err set. */
    int (*put)(void *ctx, const dnssec_key_t *key, char *id, size_t idlen, char *err,
               size_t errlen);
    /* The key of that id, with its private key; 0 and *out, or a negative code with err set. */
    int (*get)(void *ctx, const char *id, dnssec_key_t **out, char *err, size_t errlen);
    void *ctx;
} dnssec_kasp_store_t;

/**
 * Step st to now under pol (dnssec_kasp_step()), making the keys the plan asks for with
 * store->put() and registering them (dnssec_kasp_add_key()), until the plan asks for no more;
 * *plan is the last step's. zname names the zone in messages, origin is its wire name.
 * store NULL: a reader's step of its own copy of a state another node drives — nothing is made,
 * the plan uses the keys that exist, and the transitions are logged at debug level only (the
 * driver logs them). *changed is set when st changed (a transition, a key made): the caller
 * saves it. 0, or a negative code with "zone ZNAME: dnssec: what" in err.
 */
int dnssec_kasp_keys_step(dnssec_kasp_t *st, const dnssec_kasp_policy_t *pol, const char *zname,
                          const uint8_t *origin, int64_t now, const dnssec_kasp_store_t *store,
                          dnssec_kasp_plan_t *plan, bool *changed, char *err,
                          size_t errlen) TERN_WUR;

/**
 * The keys plan uses (in DNSKEY, signing, or in CDS), read with store->get(), and their roles
 * (DNSSEC_ROLE_*; CDS only when pol->publish_cds), into *out. 0, or a negative code with err set
 * (a key gone from the store, more than DNSSEC_KASP_KEYS_USED_MAX keys); out is then empty.
 */
int dnssec_kasp_keys_load(const dnssec_kasp_plan_t *plan, const dnssec_kasp_policy_t *pol,
                          const char *zname, const dnssec_kasp_store_t *store,
                          dnssec_kasp_keys_t *out, char *err, size_t errlen) TERN_WUR;

/**
 * The DS plan waits for at the parent (plan->ds_wanted), each from its key read with
 * store->get() and pol->cds_digest, into out (DNSSEC_KASP_DS_MAX); the count. A key that cannot be
 * read is logged (naming zname) and its DS not looked for.
 */
size_t dnssec_kasp_keys_ds(const dnssec_kasp_plan_t *plan, const dnssec_kasp_policy_t *pol,
                           const char *zname, const dnssec_kasp_store_t *store,
                           dnssec_kasp_ds_t out[DNSSEC_KASP_DS_MAX]);

/** The role an operator names ("ksk", "zsk", "csk", any case) into *out: 0, or TERN_EINVAL with
 * "rollover: expected ksk, zsk or csk, got \"NAME\"" in err. */
int dnssec_kasp_keys_role(const char *name, dnssec_kasp_role_t *out, char *err,
                          size_t errlen) TERN_WUR;

/* What a managed zone's unsign setting (RFC 8078) asks of its key state. */
typedef enum dnssec_kasp_unsign_step {
    DNSSEC_KASP_UNSIGN_NOTHING, /* the state is as the setting wants it */
    DNSSEC_KASP_UNSIGN_START,   /* unsign set, keys in use: start it (CDS/CDNSKEY DELETE) */
    DNSSEC_KASP_UNSIGN_NO_KEYS, /* unsign set, no key ever in use: serve unsigned, make none */
    DNSSEC_KASP_UNSIGN_AFRESH,  /* unsign unset after an unsigning finished: sign from scratch */
    DNSSEC_KASP_UNSIGN_REFUSED, /* unsign unset half way: the parent may still hold a DS, or have
                                   just dropped it; neither signing on nor stopping is safe */
} dnssec_kasp_unsign_step_t;

/** What st needs for a zone whose config says unsign (true/false); changes nothing (a reader
 * of a state another node drives asks it too). */
dnssec_kasp_unsign_step_t dnssec_kasp_keys_unsign_step(const dnssec_kasp_t *st, bool unsign);

/**
 * Apply step to *st: START unsigns it, AFRESH replaces it by a new state (each logged, naming
 * zname; *changed set); NOTHING and NO_KEYS leave it. REFUSED: TERN_EINVAL with "zone ZNAME:
 * dnssec: ..." in err, telling to keep `setting` (the config's words for the flag) until no key
 * is in use. 0, TERN_ENOMEM, or TERN_EINVAL.
 */
int dnssec_kasp_keys_unsign(dnssec_kasp_t **st, dnssec_kasp_unsign_step_t step, const char *zname,
                            const char *setting, int64_t now, bool *changed, char *err,
                            size_t errlen) TERN_WUR;

/** Free the keys out still holds (those not handed to dnssec_zone_new_roles()). */
void dnssec_kasp_keys_release(dnssec_kasp_keys_t *out);

#endif
