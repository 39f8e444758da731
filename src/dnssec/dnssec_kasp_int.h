/*
 * dnssec_kasp_int.h — what dnssec_kasp.c and dnssec_kasp_state.c share; not a public header.
 *
 * Owns the split of one component in two files: dnssec_kasp.c is the key-state machine (step,
 * rollovers, plan, status), dnssec_kasp_state.c the state-file text (write, parse, save, load).
 * Lifecycle and threading: as dnssec_kasp.h (the loader thread owns a state).
 */
#ifndef TERN_DNSSEC_DNSSEC_KASP_INT_H
#define TERN_DNSSEC_DNSSEC_KASP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/dnssec/dnssec_kasp.h"

struct dnssec_kasp {
    dnssec_kasp_key_t keys[DNSSEC_KASP_KEYS_MAX];
    size_t nkeys;
    int64_t unsign;  /* dnssec_kasp_unsign() was called then; 0: the zone is to be signed */
    int64_t ds_gone; /* while unsigning: the parent's DS was reported gone then; 0: not yet */
    bool roll_ksk;   /* a manual KSK/CSK rollover was asked for and its key not yet added */
    bool roll_zsk;   /* the same for the ZSK */
};

/* The latest time a state holds: 9999-12-31T23:59:59Z, the last an ISO 8601 status can print. */
#define KASP_TIME_MAX 253402300799LL

/* NULL if id is a usable key id (1..255 printable characters, no blank, no '='), else why not. */
const char *kasp_id_problem(const char *id);

#endif
