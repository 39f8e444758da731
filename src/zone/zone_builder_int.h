/*
 * zone_builder_int.h — private to src/zone: the builder as its three files see it.
 *
 *   zone_builder.c         collect: add() appends records, interns owners, keeps geo metadata,
 *                          policies and health references; finish() runs the passes below;
 *   zone_builder_check.c   finish, passes 1-3: group records into RRsets, drop duplicates,
 *                          validate each RRset, each name and the apex, complete the name tree;
 *   zone_builder_render.c  finish, passes 4-5: attach policies and health endpoints, size and
 *                          allocate the zone, fill it.
 *
 * Not thread-safe, like the builder: one builder (and its finish) per thread.
 */
#ifndef TERN_ZONE_ZONE_BUILDER_INT_H
#define TERN_ZONE_ZONE_BUILDER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/arena.h"
#include "tern/common/compiler.h"
#include "tern/wire/dname.h"
#include "tern/zone/zone_builder.h"

#define NO_ID UINT32_MAX

struct bname {
    uint32_t off;    /* lowercased wire name at names + off */
    uint32_t hash;   /* dname_hash */
    uint32_t parent; /* id of the parent name (set in finish for every name below the apex) */
    uint32_t first;  /* finish: first run of this name, or NO_ID; after fill_rrsets() the index
                      * of its first RRset in the zone */
    uint8_t len;
    uint8_t labels;
    uint8_t nsets; /* fill_rrsets(): the name's RRsets, and its ZONE_NODE_DELEG/DNAME flags */
    uint8_t nflags;
};

/* The hash sits beside the id so a probe that misses does not touch the name array: with a
 * million names every such touch is a cache miss. */
struct nslot {
    uint32_t id;
    uint32_t hash;
};

struct brr {
    uint32_t rdoff; /* RDATA at rdata + rdoff (add_rr() keeps the RDATA under 4 GiB) */
    uint32_t name;  /* owner id */
    uint32_t ttl;
    uint32_t line;
    uint32_t file; /* index into files */
    uint32_t meta; /* 1 + index into meta[] (geo metadata of an A/AAAA RR), 0 = none */
    uint16_t type;
    uint16_t rdlen;
    uint8_t dup; /* finish: duplicate of an earlier RR of the same RRset */
};

/* Geo metadata of one RR as add_geo() got it; the lists live in ccs[] and asns[]. */
struct bmeta {
    uint32_t weight;
    uint32_t cc_off; /* ccs[cc_off .. cc_off + ncc) */
    uint32_t asn_off;
    uint16_t nasn;
    uint8_t ncc;
    uint8_t has_loc;
    uint16_t priority; /* failover tier */
    float loc[3];
    health_ep_t *health; /* one of the builder's references (eps), or NULL */
    uint32_t group;      /* latency group id, 0 = none */
    uint32_t grp_off;    /* its name, NUL-terminated, at grpnames + grp_off */
};

/* A steering policy set for (owner, type); the owner is resolved to a name in finish, so a
 * policy may come before its RRs and one for a name without RRs creates no node. */
struct bpol {
    uint32_t owner; /* lowercased wire name at polnames + owner */
    uint8_t len;
    uint16_t type;
    zone_geo_policy_t p;
};

/* finish: one (owner, type) group of kept records, ord[start .. start+n) with dups marked */
struct brun {
    uint32_t start;
    uint32_t n;     /* records in ord, duplicates included */
    uint32_t kept;  /* after de-duplication */
    uint32_t ttl;   /* lowest of the kept records */
    uint32_t bytes; /* RDATA sequence length */
    uint16_t type;
};

struct zone_builder {
    uint8_t apex[DNAME_MAXLEN];
    uint8_t apex_len;
    uint8_t apex_labels;
    char *source;

    uint8_t *names; /* interned lowercased owner names, back to back */
    size_t names_len, names_cap;
    struct bname *nm;
    uint32_t nm_count, nm_cap;
    struct nslot *nm_slots; /* open addressing over name ids, id NO_ID = empty */
    uint32_t nm_mask;
    uint32_t last_name; /* cache: consecutive records usually share their owner */

    struct brr *rr;
    size_t rr_count, rr_cap;
    uint8_t *rdata;
    size_t rdata_len, rdata_cap;

    struct bmeta *meta;
    size_t meta_count, meta_cap;
    uint16_t *ccs;
    size_t cc_count, cc_cap;
    uint32_t *asns;
    size_t asn_count, asn_cap;
    char *grpnames; /* latency group names of bmeta, NUL-terminated, back to back */
    size_t grpnames_len, grpnames_cap;
    struct bpol *pol;
    size_t pol_count, pol_cap;
    uint8_t *polnames;
    size_t polnames_len, polnames_cap;

    char **files;
    uint32_t file_count, file_cap;
    uint32_t last_file;

    zone_builder_health_fn health_fn;
    void *health_ctx;
    health_ep_t **eps; /* every health reference the builder holds, released with it */
    size_t eps_count, eps_cap;

    /* zone_builder_set_dnssec(): the signer's DNSKEYs, added at the apex by finish() */
    bool dnssec;
    uint8_t *dnskeys; /* rdata sequence */
    size_t dnskeys_len;
    uint32_t dnskey_ttl;
    size_t dnssec_dropped;
    char *domain_id; /* zone_builder_set_domain_id() */
    size_t domain_id_len;

    char err[512];
};

/* Everything finish() computes, pass by pass; each pass reads what the earlier ones filled. */
struct fctx {
    zone_builder_t *b;
    char *err;
    size_t errlen;
    char zname[DNAME_MAXLEN * 4 + 1]; /* the apex, for messages */

    /* group_runs() */
    uint32_t *ord; /* record indexes grouped by owner, then type, then file order */
    struct brun *runs;
    size_t run_count;
    uint32_t *run_next;         /* per run: next run of the same owner, or NO_ID */
    zone_geo_policy_t *run_pol; /* attach_policies(): per run its steering (all 0 = plain) */
    health_ep_t **rr_health;    /* attach_health(): per record its endpoint, or NULL */
    bool *run_health;           /* attach_health(): the run has a checked RR */
    uint32_t *bylabel;          /* order_by_labels(): name ids, parents before children */

    /* measure() */
    size_t nnodes, slots, ntargets, nrr, rdbytes, ngeo, ngeo_rr, ngeo_cc, ngeo_asn, nhealth,
        ngeo_grp;

    /* allocate() and the fill passes: the zone's arrays in one arena, the bytes they point into
     * (names, RDATA, geo lists) in another (zone.h: zone_data_t) */
    arena_t *arena;
    arena_t *darena;
    zone_t *z;
    uint32_t *kids;
    zone_node_t **pages; /* the zone's node pages (zone.h), npages; owned by the zone once built */
    size_t npages;
    bool pages_given;
    zone_slot_t *slot;
    uint8_t *names;
    zone_rrset_t *sets;
    uint8_t *rd;
    uint32_t *targets;
    const uint8_t **tnames; /* target names, resolved once every node is in the table */
    zone_geo_t *geo;
    zone_geo_rr_t *geo_rr;
    uint16_t *geo_cc;
    uint32_t *geo_asn;
    char *geo_grp;        /* the latency group names of geo_rr, NUL-terminated */
    health_ep_t **health; /* the zone's endpoint list, nhealth slots (fill_health()) */
};

/** "file:line" of a record, or "zone X" when it came from nowhere in particular. */
void zone_builder_where(const zone_builder_t *b, const struct brr *r, char *dst, size_t len);

/** Name id's text into dst (cut with "..." when it does not fit). */
void zone_builder_name_str(const zone_builder_t *b, uint32_t id, char *dst, size_t len);

/** Name id of a lowercased wire name (len bytes, dname_hash() hash), or NO_ID. */
uint32_t zone_builder_name_find(const zone_builder_t *b, const uint8_t *lc, size_t len,
                                uint32_t hash);

/** Intern a name whose bytes are already at names + off (a suffix of an interned name), or copy
 * lc in when off is NO_ID. Returns 0 and the id in *id, or TERN_ENOMEM. */
int zone_builder_name_add(zone_builder_t *b, const uint8_t *lc, size_t len, uint32_t hash,
                          size_t off, uint32_t *id);

/** Keep one reference to ep (already taken) until the builder is freed. 0 or TERN_ENOMEM. */
int zone_builder_keep_ep(zone_builder_t *b, health_ep_t *ep);

/** finish()'s error: the message into f->err; returns rc. */
int zone_builder_fail(struct fctx *f, int rc, const char *fmt, ...) TERN_PRINTF(3, 4);

/** zone_builder_fail() with "zone X: out of memory": TERN_ENOMEM. */
int zone_builder_nomem(struct fctx *f);

/** finish(), passes 1-3 (zone_builder_check.c): the apex gets id 0; records grouped into runs,
 * de-duplicated, each RRset, each name and the apex validated; empty non-terminals added; names
 * ordered by labels; nothing below a DNAME. 0, or a negative TERN_E* with f->err set. */
int zone_builder_check(struct fctx *f);

/** finish(), passes 4-5 (zone_builder_render.c): policies and health endpoints onto their runs,
 * the zone sized and allocated (f->z), then filled. 0, or a negative TERN_E* with f->err set
 * (then nothing was filled: the caller frees f's arrays and arenas). */
int zone_builder_render(struct fctx *f);

#endif
