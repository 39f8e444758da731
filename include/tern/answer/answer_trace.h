/*
 * answer_trace.h — why a client gets the answer it gets: a record of the decisions one
 * answer_query() made, filled by the pipeline's own stages as they decide (never re-derived), for
 * `ternctl explain` (src/ctl/ctl_explain.c).
 *
 * What is recorded, in the order the stages decide it:
 *   policy   the client's verdict (ACL, blacklist, rate) and which rule gave it, the zone ACL's,
 *            the RRL verdict on the finished response — all judged WITHOUT charging anything
 *            (limit_client_dry(), limit_rrl_dry(): an explanation must not use up the client's
 *            rate, nor slip or drop the answer it explains);
 *   resolve  every lookup and what it found (exact, wildcard, NXDOMAIN, DNAME, delegation), the
 *            CNAME and DNAME hops, an ANAME's target, where a chain stopped and why, the RRset
 *            answered or the NODATA;
 *   select   for each steered RRset: every record's health rank as read, the stage that dropped
 *            it (health, first filter, second filter), whether each filter matched the client or
 *            fell back, the client's country, location and ASN and the network prefixes they hold
 *            for, fail open, the order and count rule's pick, the records given in answer order;
 *   put      for each RRSIG written: made ahead by the loader, taken from the context's signature
 *            cache, or made now.
 *
 * Cost when off: workers have ctx->trace == NULL, and every hook is one predicted branch on a
 * field of the context already in cache (`if (unlikely(ctx->trace))`); nothing else changes. On,
 * a trace is a few tens of KiB the caller owns; the hooks write into it and allocate nothing.
 *
 * Lifecycle: the caller (the control thread) allocates one answer_trace_t, answer_trace_reset()s
 * it, sets ctx->trace, runs answer_query() and reads it while the same view snapshot is held: the
 * zone, RRset and steering pointers recorded point into that view.
 * Threading: one trace belongs to one answer_ctx_t, i.e. one thread.
 */
#ifndef TERN_ANSWER_ANSWER_TRACE_H
#define TERN_ANSWER_ANSWER_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "tern/answer/answer.h"
#include "tern/wire/dname.h"
#include "tern/zone/zone.h"

/* Decisions kept per query. A CNAME chain is at most ANSWER_CNAME_MAX hops, each a lookup and a
 * hop, plus the answer and an ANAME's walk: 40 steps hold the longest; a query past that (none
 * the pipeline makes) says its trace was cut (lost). */
#define ANSWER_TRACE_STEPS 40
/* Steered RRsets per answer: one per chain link at most; 8 covers the chains seen in practice. */
#define ANSWER_TRACE_SELECTS 8
/* Records of one steered RRset described one by one: operators steer between a handful of
 * sites; the records past 64 are counted but not itemised. */
#define ANSWER_TRACE_RRS 64
/* RRSIG RRsets recorded: answer, authority and the NSEC of a denial in the longest chain. */
#define ANSWER_TRACE_SIGS 24

typedef enum {
    ANSWER_STEP_LOOKUP = 0, /* name looked up in zone: detail = zone_lookup_kind_t, flag = below
                               a delegation */
    ANSWER_STEP_CNAME,      /* the CNAME at name followed to target */
    ANSWER_STEP_DNAME,      /* name below the DNAME at target2 rewritten to target */
    ANSWER_STEP_ANAME,      /* the ANAME at name: target; detail = answer_aname_walk_t */
    ANSWER_STEP_REFERRAL,   /* a referral to the delegation at target */
    ANSWER_STEP_NXDOMAIN,   /* name does not exist in zone */
    ANSWER_STEP_NODATA,     /* name has no RRset of type */
    ANSWER_STEP_ANSWER,     /* the RRset of type at name (flag: synthesised from the wildcard at
                               target; from the ANAME results when detail is 1) */
    ANSWER_STEP_STOP,       /* the chain ends at name: detail = answer_stop_t */
} answer_step_kind_t;

typedef enum {
    ANSWER_STOP_LEFT = 0,    /* name is in no served zone: the resolver takes it from here */
    ANSWER_STOP_LIMIT,       /* ANSWER_CNAME_MAX hops reached */
    ANSWER_STOP_LOOP,        /* a CNAME or DNAME would be used a second time */
    ANSWER_STOP_HIDDEN,      /* the chain reached a zone whose ACL hides it from this client */
    ANSWER_STOP_UNAVAILABLE, /* the zone has no data (secondary never transferred, or expired) */
    ANSWER_STOP_YXDOMAIN,    /* a DNAME's result would be longer than 255 bytes */
    ANSWER_STOP_NOZONE,      /* the name asked is in no served zone: REFUSED */
    ANSWER_STOP_PENDING,     /* an ANAME target outside our zones not resolved yet: SERVFAIL */
} answer_stop_t;

/* What an ANAME's walk to its target found (ANSWER_STEP_ANAME's detail). */
typedef enum {
    ANSWER_ANAME_FOUND = 0, /* the target's RRset in our zones */
    ANSWER_ANAME_NODATA,    /* no such name or no address: NODATA */
    ANSWER_ANAME_OUT,       /* outside our zones: the resolver thread's result (target2) */
    ANSWER_ANAME_LOOP,      /* too many hops, or not resolved upstream yet: SERVFAIL */
} answer_aname_walk_t;

typedef struct answer_trace_step {
    uint8_t kind;   /* answer_step_kind_t */
    uint8_t detail; /* per kind, above */
    uint8_t flag;
    uint16_t type;
    const zone_t *zone;
    uint8_t name[DNAME_MAXLEN];
    uint8_t target[DNAME_MAXLEN];
    uint8_t target2[DNAME_MAXLEN];
} answer_trace_step_t;

/* The stage at which a record of a steered RRset left the candidates. */
enum {
    ANSWER_SEL_KEPT = 0,
    ANSWER_SEL_HEALTH,  /* a healthier record was present */
    ANSWER_SEL_FILTER1, /* the first filter (asn, country or location) */
    ANSWER_SEL_FILTER2, /* the second (country after asn) */
    ANSWER_SEL_ORDER,   /* kept by the filters, not picked by order + count single */
    ANSWER_SEL_SHED,    /* load shedding left it out (above high, or drawn between) */
    ANSWER_SEL_TIER,    /* a better failover tier was answered (steer_tier.c) */
};
/* What load shedding (steer_shed.c) made of each candidate's load (answer_trace_select_t). */
enum {
    ANSWER_SHED_NONE = 0, /* not a candidate when shedding ran (or it did not run) */
    ANSWER_SHED_UNKNOWN,  /* no load reading (none, unparsable, stale): treated as unloaded */
    ANSWER_SHED_BELOW,    /* below low: kept at its weight */
    ANSWER_SHED_SCALED,   /* between: kept, weight scaled by (high - load) / (high - low) */
    ANSWER_SHED_DRAWN,    /* between, order none/rr: left out by the draw */
    ANSWER_SHED_SPARED,   /* between, order none/rr: kept by the draw (or all would go) */
    ANSWER_SHED_OUT,      /* at or above high: left out */
    ANSWER_SHED_OPEN,     /* at or above high, kept: every candidate was (fail open) */
};

/* The groups of the client's latency map entry a trace keeps (the fastest first). */
#define ANSWER_TRACE_LATENCY 16

/* How the failover tiers decided (steer_tier.c). */
enum {
    ANSWER_TIER_QUALIFIED = 0, /* the first tier with >= min_healthy candidates */
    ANSWER_TIER_FULLEST = 1,   /* none had: the one with the most candidates */
    ANSWER_TIER_FAIL_OPEN = 2, /* every record was down: the best priority present */
};
/* Tiers passed over that a trace describes: as many as a policy lists (ZONE_GEO_TIERS_MAX). */
#define ANSWER_TRACE_TIERS ZONE_GEO_TIERS_MAX
typedef struct answer_trace_tier {
    uint16_t priority;
    uint16_t have; /* candidates it had */
    uint16_t need; /* its min_healthy */
} answer_trace_tier_t;

/* How a filter step ended (select.h: matching records, else those that list nothing, else all). */
enum {
    ANSWER_FILTER_MATCHED = 0,  /* some records match the client */
    ANSWER_FILTER_UNLISTED = 1, /* none did: the records that list nothing were kept */
    ANSWER_FILTER_ALL = 2,      /* none matched and all list something: every record kept */
};

typedef struct answer_trace_select {
    const zone_t *zone;          /* the zone the steering belongs to */
    const zone_geo_t *g;         /* its steering */
    const zone_rrset_t *rr;      /* the RRset (its rdata; g->rr[i].off index it) */
    uint8_t owner[DNAME_MAXLEN]; /* as written */
    uint16_t count;              /* g->count */
    uint16_t left[4];            /* candidates after health, filter 1, filter 2, order+count */
    bool fail_open;              /* every record was down: all kept */
    uint8_t nfilters;            /* 0, 1 or 2 filter steps ran */
    uint8_t filter_end[2];       /* ANSWER_FILTER_* of each */
    uint32_t filter_key[2];      /* the client's country (GEOIP_CC) or ASN the step compared */
    /* the client as geo saw it (a copy of the per-context cache entry, if a filter asked) */
    bool client_known;
    int client_family;
    uint8_t client_addr[16];
    answer_geo_entry_t geo;
    uint8_t rank[ANSWER_TRACE_RRS];    /* health rank as read (HEALTH_RANK_*) */
    uint8_t dropped[ANSWER_TRACE_RRS]; /* ANSWER_SEL_* */
    uint16_t nout;                     /* records given */
    uint16_t out[ANSWER_TRACE_RRS];    /* their indexes in g->rr, in answer order */
    /* geo_filter latency (src/answer/steer_latency.c): how it ended (ANSWER_LATENCY_*), the
     * client's map entry (its prefix, its groups by latency: id, ms and the map's name, which
     * points into the view's map), the group and ms answered when matched */
    struct {
        bool ran;
        bool map;        /* a latency map is configured */
        uint8_t how;     /* ANSWER_LATENCY_* */
        uint8_t prefix;  /* the map range's prefix length (the ECS scope it allows) */
        uint32_t nentry; /* groups in the client's entry (0: not in the map) */
        uint32_t group[ANSWER_TRACE_LATENCY];
        uint32_t ms[ANSWER_TRACE_LATENCY];
        const char *name[ANSWER_TRACE_LATENCY];
        uint32_t chosen_ms; /* MATCHED */
        const char *chosen; /* MATCHED: the group's name as the zone spells it */
    } latency;
    /* load shedding (steer_shed.c), when the RRset has a "shed" block: each candidate's load
     * as read (milli-units, HEALTH_LOAD_UNKNOWN), what it decided (ANSWER_SHED_*) and the
     * weight the order then read */
    bool shed;
    bool shed_fail_open;
    uint8_t shed_how[ANSWER_TRACE_RRS];
    uint32_t load[ANSWER_TRACE_RRS];
    uint32_t wscaled[ANSWER_TRACE_RRS];
    /* failover tiers (steer_tier.c): the tier answered, how, and the tiers passed over */
    bool tiered;
    uint8_t tier_how; /* ANSWER_TIER_* */
    uint16_t tier;
    uint16_t tier_skipped;
    uint8_t ntiers;
    answer_trace_tier_t tiers[ANSWER_TRACE_TIERS];
    /* the sticky order (steer_sticky.c): the client network hashed */
    bool sticky;
    uint8_t sticky_bits;
    int sticky_family;
    uint8_t sticky_net[16];
} answer_trace_select_t;

typedef enum {
    ANSWER_SIG_AHEAD = 0, /* made by the loader when the zone was signed */
    ANSWER_SIG_CACHE,     /* per query, found in the context's signature cache */
    ANSWER_SIG_MADE,      /* per query, signed now (and cached) */
    ANSWER_SIG_NONE,      /* per query, but no signer or signing failed: unsigned */
} answer_sig_how_t;

typedef struct answer_trace_sig {
    uint16_t type;
    uint8_t how; /* answer_sig_how_t */
    uint8_t sigs;
    const zone_t *zone;
    uint8_t owner[DNAME_MAXLEN];
} answer_trace_sig_t;

typedef struct answer_trace {
    /* policy: each verdict a limit_verdict_t (LIMIT_PASS when not judged), why a limit_why_t */
    bool limits; /* the view has limits at all */
    uint8_t client_vd, client_why;
    bool zone_judged; /* the zone ACL was asked (zone_vd is its answer) */
    uint8_t zone_vd;
    bool rrl_judged;   /* RRL applied to this response (UDP, no valid cookie, ...) */
    uint8_t rrl_vd;    /* LIMIT_PASS, or LIMIT_DROP for "over the limit" (drop or slip) */
    uint8_t rrl_class; /* limit_class_t */
    unsigned nsteps;
    answer_trace_step_t steps[ANSWER_TRACE_STEPS];
    unsigned nselects;
    answer_trace_select_t selects[ANSWER_TRACE_SELECTS];
    unsigned nsigs;
    answer_trace_sig_t sigs[ANSWER_TRACE_SIGS];
    bool lost; /* something did not fit above */
} answer_trace_t;

/** Empty t for the next query (the arrays are not cleared: their counts are). */
void answer_trace_reset(answer_trace_t *t);

/* ---- the hooks (called by the stages only when ctx->trace is set) ---- */

/** A step of the resolve stage; name/target/target2 may be NULL (wire names, any case). Returns
 * the step (its remaining fields for the caller), or NULL when the trace is full. */
answer_trace_step_t *answer_trace_step(answer_trace_t *t, answer_step_kind_t kind, const zone_t *z,
                                       const uint8_t *name, const uint8_t *target);

/** select.c: a steered RRset g's selection begins (candidates 0..count-1). */
answer_trace_select_t *answer_trace_select_begin(answer_trace_t *t, const zone_geo_t *g);

/** select.c: after stage (ANSWER_SEL_*) the candidates are c[0..n): the others leave there. */
void answer_trace_select_stage(answer_trace_select_t *s, unsigned stage, const uint16_t *c,
                               unsigned n);

/** select.c: filter step `step` (0, 1) compared key (a country or an ASN, per asn) and kept
 * c[0..n) of g: record whether they match, list nothing, or are all there were. */
void answer_trace_select_filter(answer_trace_select_t *s, unsigned step, bool asn, uint32_t key,
                                const zone_geo_t *g, const uint16_t *c, unsigned n);

/** answer_put.c: the last selection (of steering g) gave the n records at offs, written for
 * RRset rr of zone z at owner. */
void answer_trace_select_end(answer_trace_t *t, const answer_ctx_t *ctx, const zone_geo_t *g,
                             const zone_t *z, const zone_rrset_t *rr, const uint8_t *owner,
                             const uint32_t *offs, unsigned n);

/** answer_put.c: an RRSIG RRset of sigs signatures for type at owner, made how. */
void answer_trace_sig(answer_trace_t *t, const zone_t *z, const uint8_t *owner, uint16_t type,
                      answer_sig_how_t how, unsigned sigs);

#endif
