/*
 * aname_results.h — the addresses of out-of-zone ANAME targets, as the query workers read them.
 *
 * An ANAME whose target is not in a zone tern serves is answered from what the resolver thread
 * (source/aname_resolver.h) last learnt from the upstream servers: per target name and type (A or
 * AAAA) a state (pending, addresses, no data, no such name), a TTL and the RDATA sequence, in
 * exactly the form of zone_rrset_t.rdata so the answer path writes both the same way.
 *
 * Lifecycle: aname_results_builder_new() → aname_results_add() per (name, type) → finish() lays
 * the whole table out in one malloc'd block with its index (build); nothing changes it afterwards
 * (freeze); the resolver hands it to its publish callback, which stores it where the workers read
 * it (publish); the last aname_results_release() frees the block in one call (retire) — the
 * publisher releases the old table only after the workers can no longer hold it (RCU).
 * Threading: a builder belongs to one thread. A finished table is read by any number of threads
 * without locks; aname_results_find() allocates nothing and makes no system call. The reference
 * count is atomic, so retain/release may come from any thread.
 *
 * The index is open addressing with linear probing, at most half full, keyed by the name's
 * dname_hash() mixed with the type: a lookup is one hash probe whether or not the entry exists.
 */
#ifndef TERN_ZONE_ANAME_RESULTS_H
#define TERN_ZONE_ANAME_RESULTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"

typedef enum {
    ANAME_PENDING = 0,  /* not answered yet: no upstream has given an answer for it so far */
    ANAME_OK = 1,       /* addresses: count RRs in rdata */
    ANAME_NODATA = 2,   /* the name exists (NOERROR) but has no address of this type */
    ANAME_NXDOMAIN = 3, /* the name (or the end of its CNAME chain) does not exist */
} aname_state_t;

typedef struct aname_result {
    uint8_t state;        /* aname_state_t */
    uint16_t count;       /* RRs (ANAME_OK only, else 0) */
    uint32_t ttl;         /* OK: lowest TTL of the RRs; NODATA/NXDOMAIN: the negative TTL */
    uint32_t rdata_len;   /* bytes of rdata (ANAME_OK only, else 0) */
    const uint8_t *rdata; /* RDATA sequence exactly like zone_rrset_t.rdata: per RR a big-endian
                             u16 RDLENGTH then the RDATA (4 bytes for A, 16 for AAAA) */
} aname_result_t;

typedef struct aname_results aname_results_t; /* opaque, immutable once finished */
typedef struct aname_results_builder aname_results_builder_t;

/** An empty builder; NULL when out of memory. */
aname_results_builder_t *aname_results_builder_new(void) TERN_WUR;

/**
 * Add the result r for (lcname, qtype). lcname is a validated wire name (it is lowercased again
 * on the copy, so a mixed-case name is stored as its lowercase form); qtype is WIRE_T_A or
 * WIRE_T_AAAA. Everything is copied (r->rdata too). r must be consistent: ANAME_OK with count >= 1
 * RRs of 4 (A) or 16 (AAAA) bytes each making up exactly rdata_len bytes; any other state with
 * count 0 and rdata_len 0. Adding the same (name, qtype) twice: the last one wins.
 * 0, TERN_EINVAL (bad name, type, state or rdata; nothing added) or TERN_ENOMEM.
 */
int aname_results_add(aname_results_builder_t *b, const uint8_t *lcname, uint16_t qtype,
                      const aname_result_t *r) TERN_WUR;

/** Mark the table to be finished as complete: every name in it has been asked of the upstreams
 * at least once (the resolver's first round is in), whatever the answers were. */
void aname_results_set_complete(aname_results_builder_t *b);

/** The table of everything added, holding one reference (refs = 1). Consumes b, also on failure.
 * NULL when out of memory. An empty table is fine. */
aname_results_t *aname_results_finish(aname_results_builder_t *b) TERN_WUR;

/** Free a builder that will not be finished. NULL is a no-op. */
void aname_results_builder_free(aname_results_builder_t *b);

/**
 * The result of (lcname, qtype), or NULL when the table has none (or t is NULL). lcname is a
 * lowercased wire name of len bytes and hash = dname_hash(lcname) (wire/dname.h). The pointer
 * stays valid as long as the caller's reference to t (or its RCU read side) does.
 * Query path: no allocation, no lock, no system call.
 */
const aname_result_t *aname_results_find(const aname_results_t *t, const uint8_t *lcname,
                                         size_t len, uint32_t hash, uint16_t qtype);

/** Whether t was finished complete (aname_results_set_complete()); false for NULL. */
bool aname_results_complete(const aname_results_t *t);

/** Entries, i.e. distinct (name, type) pairs. 0 for NULL. */
size_t aname_results_count(const aname_results_t *t);

/** One more reference to t (any thread). Returns t; NULL stays NULL. */
aname_results_t *aname_results_retain(aname_results_t *t);

/** Drop one reference (any thread); the last one frees the table. NULL is a no-op. */
void aname_results_release(aname_results_t *t);

#endif
