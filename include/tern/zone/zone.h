/*
 * zone.h — one immutable zone: nodes by name, RRsets pre-rendered to wire form.
 *
 * Lifecycle: a zone_builder (zone_builder.h) collects records, validates them and produces a
 * zone_t: its arrays in the zone's own arena, its nodes in shared pages, its RRsets and bytes in
 * a shared data blob (build); nothing changes it afterwards (freeze); it is put in a zone_table
 * and published (publish); zone_free() releases the arena and its references to the pages and
 * blobs in one call once no reader can hold it (retire). A patched version (zone_patch.h) shares
 * pages and blobs with the version it came from.
 * Threading: after build, any number of threads read it without locks.
 *
 * Everything the answer path needs is computed at build time: lowercased names and their suffix
 * hashes, empty non-terminals as nodes, the wildcard child of each node, the zone cut above each
 * node, which nodes own a DNAME (nothing exists below one: the builder refuses such data), RRsets
 * sorted by type in RDATA-sequence form (see wire/write.h), the targets of NS/MX/SRV for
 * additional-section processing, and the negative-answer SOA with TTL min(TTL, MINIMUM). Lookups
 * are hash probes — never scans — so a random-subdomain query costs about as much as a hit.
 */
#ifndef TERN_ZONE_ZONE_H
#define TERN_ZONE_ZONE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/arena.h"
#include "tern/common/compiler.h"
#include "tern/health/health.h"
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"

typedef struct zone_node zone_node_t;

/*
 * Geo steering of one A or AAAA RRset (redins' "filter"; the selection itself is in answer/).
 * A steered RRset keeps all its RRs in rdata, in the order given; per RR it has the metadata the
 * filters read, and the endpoint whose health decides whether the RR is served at all. An RRset
 * with health checks but no policy is steered too (policy all defaults: every healthy RR).
 * Coordinates are turned into unit vectors at build time, so "nearest" is the largest dot product
 * (great-circle distance is monotonic in it).
 */
typedef enum {
    ZONE_GEO_FILTER_NONE = 0,
    ZONE_GEO_FILTER_COUNTRY,     /* RRs listing the client's country, else those listing none */
    ZONE_GEO_FILTER_ASN,         /* the same with the client's ASN */
    ZONE_GEO_FILTER_ASN_COUNTRY, /* ASN first, then country among what is left */
    ZONE_GEO_FILTER_LOCATION,    /* the RRs nearest the client */
    /* The RRs of the group with the lowest latency from the client's network in the latency map
     * (tern/geo/latency_map.h), else location (src/answer/steer_latency.c) */
    ZONE_GEO_FILTER_LATENCY,
} zone_geo_filter_t;
typedef enum { ZONE_GEO_COUNT_MULTI = 0, ZONE_GEO_COUNT_SINGLE } zone_geo_count_t;
typedef enum {
    ZONE_GEO_ORDER_NONE = 0, /* the first remaining RR */
    ZONE_GEO_ORDER_WEIGHTED, /* one by weight (all zero: uniform) */
    ZONE_GEO_ORDER_RR,       /* one uniformly at random */
    ZONE_GEO_ORDER_STICKY,   /* by weighted rendezvous hash of the client's network */
} zone_geo_order_t;

/* Failover tiers (issue 33): the per-tier "min_healthy" an RRset lists by priority. Operators
 * steer between a primary, a secondary and a last-resort tier, seldom more: 8 listed tiers is
 * room to spare and keeps the policy a fixed size the builder copies as a value. */
#define ZONE_GEO_TIERS_MAX 8
typedef struct zone_geo_min {
    uint16_t priority;
    uint16_t n; /* 1..65535 */
} zone_geo_min_t;

typedef struct zone_geo_policy {
    uint8_t filter; /* zone_geo_filter_t */
    uint8_t count;  /* zone_geo_count_t */
    uint8_t order;  /* zone_geo_order_t */
    /* Load shedding (issue 33, answer/steer_shed.c): the RRset has a "shed" block. Read by every
     * query of a steered RRset, so among the policy's first bytes (zone_geo_t's first 16). */
    uint8_t shed;
    /* Failover tiers and the sticky order (issue 33, select.h; all 0 = unused). */
    uint8_t sticky_v4;    /* "sticky_prefix": bits of an IPv4 client hashed; 0 = the server's */
    uint8_t sticky_v6;    /* ... of an IPv6 client */
    uint8_t nmin;         /* min[0 .. nmin): "min_healthy" per listed priority */
    uint16_t min_healthy; /* "min_healthy" of every other tier; 0 = not given (1) */
    zone_geo_min_t min[ZONE_GEO_TIERS_MAX];
    /* ... shed's watermarks: each record's load is its health endpoint's cell
     * (health_ep_load()); at or above shed_high a record is left out while another stays below
     * it, between the watermarks its weight is scaled down. Milli-units, shed_low < shed_high;
     * both 0 when shed is 0. */
    uint32_t shed_low, shed_high;
} zone_geo_policy_t;

/* A country code as two upper-case ASCII letters packed big-endian ('U' << 8 | 'S'). 0 stands for
 * redins' "" entry: "matches a client of unknown or unlisted country" (the fallback set). */
#define ZONE_CC(a, b) ((uint16_t)((uint8_t)(a) << 8 | (uint8_t)(b)))

typedef struct zone_geo_rr {
    uint32_t off;       /* offset of this RR (its RDLENGTH) in the RRset's rdata */
    uint32_t weight;    /* for ZONE_GEO_ORDER_WEIGHTED */
    float loc[3];       /* unit vector of the RR's location, valid when has_loc */
    uint8_t has_loc;    /* 0: no location known: never "nearest" unless nothing is located */
    uint8_t ncountries; /* countries[0 .. ncountries) */
    uint16_t nasns;     /* asns[0 .. nasns) */
    uint16_t priority;  /* failover tier: lower is preferred (0, the default, is the best) */
    /* latency_group_id() of the record's "group" (its PoP in the latency map,
     * tern/geo/latency_group.h), 0 = none */
    uint32_t group;
    uint32_t ident; /* a hash of the RR's RDATA: its identity for the sticky order */
    const uint16_t *countries;
    const uint32_t *asns;
    const health_ep_t *health; /* the RR's health-checked endpoint, or NULL (always up) */
    const char *group_name;    /* the group as the zone spells it (NUL-terminated), or NULL */
} zone_geo_rr_t;

/* What a query reads first (rr, count, health, tiers, the policy's first four bytes: 16 bytes)
 * leads, and the entry is 64 bytes: the zone's array of them is 16-byte aligned (arena), so those
 * bytes never straddle two cache lines, and an RRset that uses no rule of issue 33 reads no other
 * line than before. */
typedef struct zone_geo {
    const zone_geo_rr_t *rr;
    uint16_t count; /* RRs, == the RRset's count */
    bool health;    /* some RR has a health check: select the healthiest first (select.h) */
    bool tiers;     /* failover tiers apply: some RR has a priority, or min_healthy is given */
    zone_geo_policy_t policy; /* 52 bytes: the entry is 64, with no spare left */
} zone_geo_t;
_Static_assert(sizeof(zone_geo_t) == 64 && offsetof(zone_geo_t, policy) == 12,
               "zone_geo_t: 64 bytes, the policy's hot bytes in the first 16");

/* 24 bytes: one per owner name and type, so a 100,000-name zone holds about as many. */
typedef struct zone_rrset {
    uint16_t type;
    uint16_t count;     /* RRs */
    uint32_t ttl;       /* one TTL per RRset (RFC 2181 §5.2: the lowest given) */
    uint32_t rdata_len; /* bytes of rdata */
    /* What the zone keeps beside the RRset, by type (the tag is `type`; read it through
     * zone_rrset_target() and zone_rrset_geo(), never directly):
     *   NS, MX, SRV: targets = 1 + the index in zone.targets of RR 0's target name (RR i's is
     *                the i-th after it), for additional-section processing;
     *   A, AAAA:     geo = 1 + the index in zone.geo of the RRset's steering, 0 = plain;
     *   other types: 0. */
    union {
        uint32_t targets;
        uint32_t geo;
    } ext;
    const uint8_t *rdata; /* RDATA sequence: per RR a u16 RDLENGTH + RDATA */
} zone_rrset_t;

enum zone_node_flags {
    ZONE_NODE_APEX = 1u << 0,  /* the zone apex */
    ZONE_NODE_DELEG = 1u << 1, /* NS below the apex: a zone cut (delegation point) */
    ZONE_NODE_ENT = 1u << 2,   /* empty non-terminal: no RRsets, exists because of a descendant */
    ZONE_NODE_WILD = 1u << 3,  /* the name's first label is "*" */
    ZONE_NODE_DNAME = 1u << 4, /* has a DNAME RRset (RFC 6672); no node exists below it */
    ZONE_NODE_CUT = 1u << 5,   /* a delegation point that is its own cut (the topmost of nested
                                  NS sets): referrals name it */
};

/* 32 bytes: the name's hash lives in the index slot (zone_slot_t), the wildcard child and the
 * cut are indexes; a 100,000-name zone has as many nodes, so every 8 bytes here is most of a
 * megabyte. Nothing points at a node but the zone's page directory (zone_t.node_pages): that is
 * what lets a patched version copy only the pages it changes. */
struct zone_node {
    const uint8_t *name; /* lowercased wire name */
    uint8_t name_len;
    uint8_t labels;             /* root excluded */
    uint8_t flags;              /* zone_node_flags */
    uint8_t nrrsets;            /* RRsets at rrsets[0..nrrsets), types ascending */
    uint32_t wildcard;          /* index + 1 (zone_node_at()) of "*.<name>" if it exists, else 0 */
    uint32_t cut;               /* index + 1 of the nearest delegation point at or above this node,
                                   strictly below the apex; 0 if none (the node is authoritative). With
                                   nested NS sets it is the topmost one (the inner ones are occluded),
                                   which a top-down walk meets first (zone_node_cut()). */
    const zone_rrset_t *rrsets; /* an array sorted by type, in a data blob; NULL for an ENT */
};

/* Nodes live in pages of ZONE_NODE_PAGE (the last one, and a small zone's only one, as long as
 * needed): zone_node_at() is one more load than a flat array, from a directory of a few hundred
 * pointers that stays in L1, and a patched version (zone_patch.h) shares every page it does not
 * write, so a 1,000,000-name zone's 43 MB of nodes are not copied for a change of one name. 4096
 * nodes is 128 KiB a page: a change copies that much, and the directory of a 1M-name zone is 2.6
 * KB. */
#define ZONE_NODE_SHIFT 12
#define ZONE_NODE_PAGE  (1u << ZONE_NODE_SHIFT)

/* A page's header, a cache line before its nodes (so no node straddles two lines). Counted
 * references, atomic: every version whose directory holds the page holds one. */
typedef struct zone_node_page {
    uint32_t refs;
    uint32_t cap; /* nodes the page has room for */
    uint8_t pad[56];
    zone_node_t nodes[];
} zone_node_page_t;

/* One slot of a zone's name index: the node's hash beside its index, so a probe compares hashes
 * without touching the node (a random-subdomain NXDOMAIN costs no node cache misses). */
typedef struct zone_slot {
    uint32_t hash;
    uint32_t node; /* index into zone.nodes plus one; 0 = empty slot */
} zone_slot_t;

struct dnssec_zone; /* tern/dnssec/dnssec_zone.h */

/* The immutable bytes a zone points into (RRsets, names, RDATA, geo lists, its source string),
 * apart from its arrays (zone, index, targets, geo, child counts) and node pages: a patched
 * version (zone_patch.h) copies the arrays, copies the pages it writes, and shares these. Counted
 * references, atomic: a version a transfer thread pinned may be the last to let go. */
typedef struct zone_data {
    uint32_t refs;
    arena_t *arena;
} zone_data_t;

typedef struct zone {
    const uint8_t *apex; /* lowercased wire name of the origin */
    uint32_t hash;       /* dname_hash(apex) */
    uint8_t apex_len;
    uint8_t apex_labels;
    uint8_t max_labels; /* labels of the deepest node: lookups start there */
    /* A secondary zone never transferred yet, or expired (RFC 1034 §4.3.5): every query for
     * it is answered SERVFAIL. Such a zone holds only an apex (zone_new_unavailable()). */
    uint8_t unavailable;
    uint32_t serial;
    /* The serial its source gave it: a serial raised for secondaries (zone_set_serial*()) leaves
     * this as it was. Dynamic updates count from it, since their journal continues the source's
     * serials (tern/update). */
    uint32_t src_serial;
    const zone_node_t *apex_node;
    const zone_rrset_t *soa;       /* the apex SOA */
    const zone_rrset_t *neg_soa;   /* the SOA with TTL min(SOA TTL, MINIMUM), for NXDOMAIN/NODATA */
    const zone_rrset_t *apex_ns;   /* the apex NS */
    uint32_t node_mask;            /* node_slots has node_mask + 1 entries (a power of two) */
    const zone_slot_t *node_slots; /* open addressing, linear probing, at most 2/3 full */
    /* node_count nodes, in pages (zone_node_at()); the apex is node 0. Each page is the nodes of
     * a zone_node_page_t, one reference each. */
    zone_node_t *const *node_pages;
    uint32_t node_page_count;
    /* Every RRset of the zone as built, the nodes' arrays back to back (neg_soa last), in the
     * build's data blob: an RRset's index here keys what is kept per RRset outside the zone
     * (its signatures; a signed zone is never patched). A patched version's changed names have
     * RRsets elsewhere (in the patch's data blob); this stays the build's. */
    const zone_rrset_t *rrsets;
    uint32_t rrset_count;
    uint32_t target_count; /* entries of targets */
    /* Targets of the NS/MX/SRV records: 1 + the index in nodes of the target name when it is in
     * this zone, else 0. Used for additional-section A/AAAA and glue. */
    const uint32_t *targets; /* target_count */
    const zone_geo_t *geo;   /* steered A/AAAA RRsets (zone_rrset_t.ext.geo), geo_count */
    uint32_t geo_count;
    /* The health-checked endpoints the zone's RRs point at, each once, each holding one
     * reference (health.h) that zone_free() drops. */
    health_ep_t *const *health;
    uint32_t health_count;
    size_t node_count;
    size_t rr_count;
    uint32_t aname_count; /* ANAME RRsets reachable from the index (the loader collects their
                             targets only from zones that have any) */
    const char *source;   /* where it came from (file path), for logs */
    /* redins' domain_id from the zone's config (zone_json.h), domain_id_len bytes, not
     * NUL-terminated; "" (0) when it gives none. The request log's domain_uuid. */
    const char *domain_id;
    uint16_t domain_id_len;
    /* DNSSEC signing state (tern/dnssec/dnssec_zone.h), NULL for an unsigned zone; set by the
     * loader before the zone is published, released by zone_free() through dnssec_free. */
    struct dnssec_zone *dnssec;
    void (*dnssec_free)(struct dnssec_zone *);
    /* Node i's child nodes (names one label longer below it): what zone_patch() needs to tell
     * an empty non-terminal that must stay from one that goes. Not read by lookups. */
    const uint32_t *kids;
    arena_t *arena;      /* owns the zone struct and its arrays but the nodes */
    zone_data_t **data;  /* the byte blobs it points into, one reference each */
    uint32_t data_count; /* 1 for a built zone, 1 + patches for a patched one */
    uint32_t patches;    /* zone_patch() calls since the last full build */
    size_t built_bytes;  /* zone_footprint() when it was built: what patches are measured by */
    size_t patched;      /* names those patches changed */
    /* The change (zone_delta.h) zone_patch() made this version by, one reference; NULL for a
     * build. What the IXFR journal compares instead of the whole zone (zone_patch_delta()). */
    struct zone_delta *delta;
    /* References: the builder hands out one; every zone table holding the zone holds one (a
     * reload shares an unchanged zone between the old and the new table); a transfer thread
     * pins the version it streams or diffs (tern/xfr). Atomic, never touched on the query
     * path. Last: zone_patch() copies the fields before it, never the count. */
    uint32_t refs;
} zone_t;

/** Node i of z (0 <= i < node_count; the apex is node 0). Index references (slots, wildcard,
 * targets, kids) are 1 + i. */
static inline const zone_node_t *zone_node_at(const zone_t *z, uint32_t i)
{
    return &z->node_pages[i >> ZONE_NODE_SHIFT][i & (ZONE_NODE_PAGE - 1)];
}

/** The delegation point node n of z is at or below (zone_node_t.cut), or NULL. */
static inline const zone_node_t *zone_node_cut(const zone_t *z, const zone_node_t *n)
{
    return n->cut ? zone_node_at(z, n->cut - 1) : NULL;
}

/** A new node page with room for cap nodes (at most ZONE_NODE_PAGE; their bytes undefined), one
 * reference; NULL when out of memory. For builders and zone_patch(). */
zone_node_t *zone_node_page_new(uint32_t cap);

/** The page header of a page's nodes. */
static inline zone_node_page_t *zone_node_page_of(const zone_node_t *nodes)
{
    return (zone_node_page_t *)((uintptr_t)nodes - offsetof(zone_node_page_t, nodes));
}

/** Drop one reference to the page whose nodes these are; the last one frees it. */
void zone_node_page_release(zone_node_t *nodes);

/** Node with exactly this lowercased name (len bytes, hash = its dname hash), or NULL. */
const zone_node_t *zone_find_node(const zone_t *z, const uint8_t *lcname, size_t len,
                                  uint32_t hash);

/** 1 + the index (zone_node_at()) of the node with exactly this lowercased name, or 0. */
uint32_t zone_find_index(const zone_t *z, const uint8_t *lcname, size_t len, uint32_t hash);

/** The node's RRset of this type, or NULL. */
const zone_rrset_t *zone_node_rrset(const zone_node_t *n, uint16_t type);

typedef enum {
    ZONE_LOOKUP_EXACT,    /* node is the name's own node (may be an ENT, may be below a cut) */
    ZONE_LOOKUP_WILDCARD, /* node is the wildcard that covers the name (RFC 4592) */
    ZONE_LOOKUP_NXDOMAIN, /* no node and no wildcard; encloser is the closest encloser */
    ZONE_LOOKUP_DNAME,    /* the name is below node, which owns a DNAME (RFC 6672 §2.2): the
                             answer is the DNAME and a CNAME synthesised from it */
} zone_lookup_kind_t;

typedef struct zone_lookup {
    zone_lookup_kind_t kind;
    const zone_node_t *node;     /* EXACT/WILDCARD: the matching node; DNAME: the DNAME's owner;
                                    NXDOMAIN: NULL */
    const zone_node_t *encloser; /* closest encloser (the node itself for EXACT) */
    unsigned encloser_label;     /* the label of the name where the encloser's name starts (0 for
                                    EXACT): the labels before it are what a DNAME rewrites */
    const zone_node_t *cut;      /* delegation point at or above the name, or NULL. When set, the
                                    name is not authoritative data of this zone (a referral), except
                                    a DS query exactly at the cut (RFC 4035 §3.1.4.1). */
} zone_lookup_t;

/**
 * Resolve name v inside zone z, whose apex is the suffix of v starting at label apex_label
 * (as zone_table_find() returns). Probes at most max_labels - apex_labels + 1 suffixes, each one
 * hash lookup; a wildcard is considered only below the closest encloser and never below a cut.
 * A closest encloser that owns a DNAME (and is not below a cut) gives ZONE_LOOKUP_DNAME for every
 * name below it: it is found on the same walk, no extra probe.
 */
void zone_lookup(const zone_t *z, const dname_view_t *v, unsigned apex_label, zone_lookup_t *r);

/** Whether RRsets of this type name targets for the additional section (NS, MX, SRV). */
static inline bool zone_type_has_targets(uint16_t type)
{
    return type == WIRE_T_NS || type == WIRE_T_MX || type == WIRE_T_SRV;
}

/** Where the target name starts in the RDATA of such a type (after MX's preference, after
 * SRV's priority, weight and port). */
static inline size_t zone_type_target_off(uint16_t type)
{
    return type == WIRE_T_MX ? 2 : type == WIRE_T_SRV ? 6 : 0;
}

/** Whether s is an NS, MX or SRV RRset with additional-section targets (zone_rrset_t.ext). */
static inline bool zone_rrset_has_targets(const zone_rrset_t *s)
{
    return zone_type_has_targets(s->type) && s->ext.targets != 0;
}

/** For RR i of an NS/MX/SRV RRset s of zone z: the node of its target name if it is in the zone,
 * else NULL (also for every other type). */
static inline const zone_node_t *zone_rrset_target(const zone_t *z, const zone_rrset_t *s,
                                                   unsigned i)
{
    if (!zone_rrset_has_targets(s))
        return NULL;
    uint32_t n = z->targets[s->ext.targets - 1 + i];
    return n ? zone_node_at(z, n - 1) : NULL;
}

/** The geo steering of RRset s of zone z, or NULL for a plain RRset (and every type but A/AAAA). */
static inline const zone_geo_t *zone_rrset_geo(const zone_t *z, const zone_rrset_t *s)
{
    if ((s->type != WIRE_T_A && s->type != WIRE_T_AAAA) || !s->ext.geo)
        return NULL;
    return &z->geo[s->ext.geo - 1];
}

/** Bytes of memory the zone holds: its arrays and every data blob it references. */
size_t zone_footprint(const zone_t *z);

/** The largest TTL of z's RRsets (0 for a zone without any): how long an answer from it may be
 * cached, which a key rollover waits for. */
uint32_t zone_max_ttl(const zone_t *z);

/** Take one more reference to z (any thread: the count is atomic). Returns z. */
zone_t *zone_retain(zone_t *z);

/** Drop one reference to a data blob; the last one frees it. NULL is a no-op. */
void zone_data_release(zone_data_t *d);

/**
 * A zone that answers SERVFAIL for every name in it (zone.unavailable): a secondary zone with no
 * data yet, or whose data expired. Its apex carries a synthetic SOA (serial 0) and NS that are
 * never served. NULL when out of memory. source names it in logs.
 */
zone_t *zone_new_unavailable(const uint8_t *apex, const char *source) TERN_WUR;

/**
 * Give z's SOA a new serial, before z is published, by its only owner (a loader raising the
 * serial of a changed zone its secondaries follow). The RDATA is copied into a data blob of its
 * own, so versions sharing the old RDATA are untouched. Not for a signed zone (its SOA
 * signature would no longer match). 0, TERN_EINVAL (no single SOA), TERN_ENOMEM.
 */
int zone_set_serial(zone_t *z, uint32_t serial) TERN_WUR;

/**
 * The serial to serve for a new version whose own serial is `serial`, when secondaries follow
 * the zone and the version must rise above theirs (they take nothing else): had false, the
 * first version since start — `serial`, or now (Unix seconds) when that is higher, since a
 * secondary may hold a serial raised before a restart; had true, last being the serial served —
 * `serial` when it is above last, else max(last + 1, now) (Knot's serial-policy unixtime, so
 * serials keep rising across restarts). RFC 1982 comparisons.
 */
uint32_t zone_serial_next(bool had, uint32_t last, uint32_t serial, uint32_t now);

/**
 * The same for a zone straight from its build, before it is signed: the SOA's RDATA is written
 * in place, so the SOA stays the build's RRset (a signed zone's signatures made ahead are kept
 * by that index, tern/dnssec/dnssec_zone.h). 0, or TERN_EINVAL: no single SOA, or z is not a
 * fresh build (its data shared, or patched).
 */
int zone_set_serial_fresh(zone_t *z, uint32_t serial) TERN_WUR;

/** Drop one reference; the last one releases the zone and all its data (its arena). NULL is a
 * no-op. */
void zone_free(zone_t *z);

#endif
