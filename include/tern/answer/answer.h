/*
 * answer.h — the query pipeline: one query, parsed, through four named stages, each in its own
 * file (src/answer/answer_<stage>.c) over one per-query struct (src/answer/answer_int.h):
 *
 *   answer_parsed() (answer.c):  policy → dispatch → resolve → finish
 *
 *   policy    who may ask and what they may see (tern/limit/limit.h): the client's ACL,
 *             blacklist and rate (REFUSED or no response), its DNS cookie, and the ACL of the zone
 *             of the name asked (with limits in the view the name is looked up here for it,
 *             and the lookup handed to resolve: no second walk). Leaves its verdicts for
 *             dispatch; only a drop ends the query here.
 *   dispatch  what the request is: the verdicts in their order of precedence, parse errors,
 *             opcodes, classes, meta types (an rcode or TC), CHAOS identity, and the hand-off of
 *             NOTIFY, TSIG-signed requests and AXFR/IXFR over TCP to the transfer thread
 *             (ANSWER_HANDOFF); what is left is a question for the zones.
 *   resolve   RFC 1034 over the view (below): lookups, chains, ANAME, written with the RRSIGs of
 *             signed zones (answer_put.c). No policy call, no RRL, no limit: a chain crossing
 *             into another zone asks the policy's per-zone ACL through a hook, and it returns
 *             what it answered (answer, NODATA, NXDOMAIN, referral, wildcard or nothing to class).
 *   finish    the OPT (EDNS, ECS scope, cookie), RRL on the finished UDP response with its class
 *             derived once from resolve's outcome, answer_info_t's last fields. It also opens the
 *             response before dispatch: header, question, the OPT's room, RRL armed.
 *
 * Where each feature lives: ACL, rate limit, cookies and the per-zone ACL in policy; the
 * transfer hand-off in dispatch; DNSSEC (in resolve's writer, because an RRSIG must follow its
 * RRset where it is written), ANAME and geo selection (select.h) in resolve; RRL and the query
 * log's copy in finish (answer_info_t's rcode, TC, scope and zone, which tern/qlog and the
 * statistics read; the geo pick and health fail-open are noted by select.c as they happen).
 * Prefetch (answer_prefetch(), answer_prefetch.c) runs ahead of the pipeline, over a whole batch.
 *
 * Resolution follows RFC 1034 §4.3.2 with RFC 2181, RFC 4592 (wildcards), RFC 6604 (CNAME rcode),
 * RFC 6672 (DNAME) and RFC 8482 (minimal ANY):
 *   - exact match: AA, the RRset; NODATA (also at empty non-terminals): NOERROR, SOA in authority
 *     with TTL min(SOA TTL, MINIMUM); NXDOMAIN: the same SOA;
 *   - CNAME chains followed through every served zone, at most ANSWER_CNAME_MAX hops, loops
 *     stopped; qtype CNAME returns the CNAME alone; a target outside our zones ends the chain;
 *   - DNAME: a name below a DNAME owner gets the DNAME and a CNAME synthesised from it (the
 *     DNAME's TTL, the name as asked), and the chain goes on from the new name like any CNAME,
 *     counted against the same limit; a DNAME used twice in one chain stops it; a synthesised
 *     name longer than 255 bytes is YXDOMAIN with the DNAME alone; the owner answers for itself;
 *   - wildcards synthesise the answer with the query's own name and case;
 *   - ANAME (WIRE_T_ANAME): A and AAAA at an owner without its own RRset of that type are
 *     answered with the target's, owned by the name asked, resolved per query in the same view
 *     (the target's geo steering, weights and health apply to this client, with their ECS
 *     scope), following CNAMEs and ANAMEs at the target within ANSWER_CNAME_MAX hops; the TTL
 *     is the lowest along the way. A target that does not exist or has no address: NODATA. A
 *     target outside the served zones (or below one of their delegations) is answered from
 *     view->aname, what the resolver thread last got upstream: SERVFAIL until it has an answer.
 *     Every other type at the owner is answered from its own data;
 *   - delegations: referral without AA, NS in authority, glue in additional — the glue below the
 *     cut must fit or the response is truncated (TC, RFC 9471), other name servers' addresses
 *     are added if they fit; DS at a delegation point is answered by the parent side;
 *   - additional section after an answer: A/AAAA of NS, MX and SRV targets in our data (never
 *     TC for it);
 *   - no zone: REFUSED; class other than IN (and ANY, answered from IN as NSD and Knot do):
 *     REFUSED, except CHAOS TXT id.server. / hostname.bind. (identity) and version.bind. /
 *     version.server. (version) when configured; ANY: one RRset of the name (RFC 8482 §4.1);
 *   - opcodes and transfers: with transfers configured, NOTIFY, a TSIG-signed request and
 *     AXFR/IXFR over TCP are handed to the transfer thread (ANSWER_HANDOFF, tern/xfr); without,
 *     NOTIFY is NOTAUTH. Any other opcode but QUERY is NOTIMP, also as a bare header without a
 *     question (QUERY and NOTIFY without one are FORMERR). AXFR over UDP is NOTIMP (RFC 5936
 *     §4.2); IXFR over UDP is TC with transfers configured (RFC 1995 §2); AXFR/IXFR not handed
 *     off are REFUSED;
 *   - FORMERR for several questions copies no flag (as NSD); otherwise the question is echoed
 *     exactly as sent, RD copied, RA never set.
 *
 * Lifecycle: the view is published whole by the loader (RCU) and only read here; answer_ctx_t
 * lives as long as its worker, the per-query struct for one answer_parsed() call.
 * Threading: every worker owns one answer_ctx_t and reads an answer_view_t snapshot; nothing here
 * allocates, locks or does I/O.
 */
#ifndef TERN_ANSWER_ANSWER_H
#define TERN_ANSWER_ANSWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "tern/common/compiler.h"
#include "tern/dnssec/dnssec_zone.h"
#include "tern/geo/asn_table.h"
#include "tern/geo/latency_map.h"
#include "tern/geo/geoip.h"
#include "tern/limit/limit.h"
#include "tern/wire/parse.h"
#include "tern/wire/write.h"
#include "tern/zone/aname_results.h"
#include "tern/zone/zone_table.h"

/* RFC 1034 leaves the chain length to the server. Knot 3.2 stops after 5 CNAMEs (and only within
 * one zone); we follow chains across zones, and CDN-style chains through two or three zones
 * reach 5-6 hops, so 8 keeps them whole while still bounding the work per query: at most
 * ANSWER_CNAME_MAX CNAMEs are written and followed (answer_resolve.c). */
#define ANSWER_CNAME_MAX 8

/* RFC 6891 §6.2.5 / DNS flag day 2020: 1232 bytes avoids IP fragmentation on every path. */
#define ANSWER_EDNS_DEFAULT 1232

typedef struct answer_config {
    uint16_t edns_max_udp; /* payload size we advertise and the cap on the client's (>= 512) */
    const char *identity;  /* CHAOS id.server / hostname.bind answer; NULL = REFUSED */
    const char *version;   /* CHAOS version.bind answer; NULL = REFUSED */
    /* Zone transfers are configured (tern/xfr): AXFR/IXFR over TCP, NOTIFY and TSIG-signed
     * requests are handed to the transfer thread (ANSWER_HANDOFF); IXFR over UDP is answered
     * TC (ask again over TCP). Off: AXFR/IXFR are REFUSED, NOTIFY NOTAUTH. */
    bool xfr;
    /* The sticky order (issue 33, select.h): bits of an IPv4 / IPv6 client's network it hashes
     * unless the RRset says otherwise (ternd.yaml steering:); 0 = ANSWER_STICKY_V4/V6. */
    uint8_t sticky_prefix_v4;
    uint8_t sticky_prefix_v6;
} answer_config_t;

/* RFC 7871 §11.1 recommends ECS source prefixes of /24 (IPv4) and /56 (IPv6): what resolvers send,
 * and a network of one customer in practice, so a sticky client's neighbours stay with it. */
#define ANSWER_STICKY_V4 24
#define ANSWER_STICKY_V6 56

/*
 * What the workers answer from: one immutable snapshot, published as a whole by the loader
 * through RCU (tern/common/rcu.h) so a query never sees a table from one reload and a setting
 * from another.
 */
typedef struct answer_view {
    const zone_table_t *table;
    answer_config_t cfg;
    const asn_table_t *asn; /* the mapped IP-to-ASN table, or NULL (tern/geo/asn_table.h) */
    geoip_set_t geoip;      /* MaxMind DBs for country and location; either may be NULL */
    /* the operator's latency map (geo_filter "latency"), or NULL (tern/geo/latency_map.h) */
    const latency_map_t *latency;
    const limit_t *limit; /* ACLs, rate limits, RRL, cookies (tern/limit/limit.h); NULL: none */
    /* ANAME targets outside the served zones, as the resolver thread last resolved them
     * (tern/zone/aname_results.h); NULL: none (their owners answer SERVFAIL) */
    const aname_results_t *aname;
    bool dnssec;  /* some zone is signed: workers keep the wall clock per batch */
    uint64_t gen; /* distinct for every published view (geo lookups cached per view) */
} answer_view_t;

/**
 * Background threads (never a worker): pin the published version of the zone whose apex is
 * name (a lowercased or any-case wire name): a reference taken while the view cannot be freed
 * (RCU read side, the calling thread online only for that; it must be registered and offline),
 * so the caller holds no grace period up afterwards. NULL when no zone has that apex.
 */
zone_t *answer_pin_zone(const answer_view_t *const *published, const uint8_t *name) TERN_WUR;

typedef enum { ANSWER_UDP = 0, ANSWER_TCP = 1 } answer_transport_t;

/* What happened, for statistics and the query log (filled by answer_query()'s stages). */
typedef enum {
    ANSWER_SENT = 0,        /* a response was written */
    ANSWER_DROP_SHORT = 1,  /* fewer than 12 bytes: not DNS, no response */
    ANSWER_DROP_QR = 2,     /* QR set: a response, never answered (no reflection loops) */
    ANSWER_DROP_POLICY = 3, /* an ACL, the rate limit or RRL said drop (info.limit_why) */
    ANSWER_HANDOFF = 4,     /* for the transfer thread (answer_config.xfr): nothing written;
                               the transport hands the message (TCP: the connection) over */
} answer_outcome_t;

/* What the steering rules beyond redins (issue 33: failover tiers, sticky order, load shedding,
 * latency maps) decided for the answer's last steered RRset that used one (select.c), for the
 * request log. `rules` is 0 when none ran: an RRset using only redins' rules leaves all of it
 * zero, and the log line stays redins' own. Reset per query with one store (answer.c). */
enum {
    ANSWER_STEER_TIER = 1u << 0,    /* failover tiers chose tier / fell past some */
    ANSWER_STEER_STICKY = 1u << 1,  /* the sticky order hashed the client's network */
    ANSWER_STEER_SHED = 1u << 2,    /* some record's load left it out or scaled its weight */
    ANSWER_STEER_LATENCY = 1u << 3, /* geo_filter latency ran (latency_how says how it ended) */
};
enum {
    ANSWER_LATENCY_MATCHED = 0,  /* the client's network is in the map: the fastest group kept */
    ANSWER_LATENCY_UNMAPPED = 1, /* not in the map: fell back to location */
    ANSWER_LATENCY_NOGROUP = 2,  /* in the map, but no candidate's group is: fell back */
};
typedef struct answer_steer_info {
    uint8_t rules;         /* ANSWER_STEER_* that ran */
    uint8_t tier_skipped;  /* TIER: tiers passed over (fewer healthy records than min_healthy) */
    uint16_t tier;         /* TIER: the priority of the tier answered */
    uint8_t sticky_prefix; /* STICKY: bits of the client's network hashed */
    uint8_t shed_out;      /* SHED: records left out: at or above their high watermark, or drawn
                              out between the watermarks (orders that weigh nothing) */
    uint8_t shed_scaled;   /* SHED: records kept with their weight scaled down */
    uint8_t latency_how;   /* LATENCY: ANSWER_LATENCY_* */
    uint32_t latency_ms;   /* LATENCY, MATCHED: the measured latency of the group answered */
    const char *latency_group; /* LATENCY, MATCHED: its name (NUL-terminated, in the zone) */
} answer_steer_info_t;

typedef struct answer_info {
    unsigned rcode; /* full (extended) rcode sent, or -1u when dropped */
    bool truncated; /* TC set */
    bool edns;      /* the query had an OPT record */
    bool ecs;       /* ... with a valid EDNS Client Subnet option */
    uint16_t qtype; /* as asked (0 when dropped) */
    answer_outcome_t outcome;
    uint16_t health_fail_open; /* health-checked RRsets served whole: every record down */
    uint8_t limit_why;         /* limit_why_t: which rule refused, dropped or slipped it */
    uint8_t limit_verdict;     /* limit_verdict_t of that rule (LIMIT_PASS: none) */
    bool cookie;               /* the query had a COOKIE option (cookies on) */
    bool cookie_valid;         /* ... with a valid server cookie */
    bool badcookie;            /* answered BADCOOKIE */
    uint8_t scope;             /* ECS scope prefix written in the response (0: none) */
    const struct zone *zone;   /* the zone of the name asked (a chain may go on elsewhere), or
                                  NULL when no served zone holds it */
    /* The record a steered RRset with count single picked for the client out of more than one
     * candidate (select.c), the last such pick of the answer: its steering (countries) and its
     * RRset's rdata (the RR at pick->off). NULL when there was none. For the query log (redins'
     * destination_ip and destination_country); valid while the view is. */
    const struct zone_geo_rr *pick;
    const uint8_t *pick_rdata;
    answer_steer_info_t steer;
} answer_info_t;

/* What the geo filters looked up for one client address (select.c), kept per worker: resolvers
 * send many queries from one address or ECS subnet, and a MaxMind lookup is a walk of up to 128
 * tree nodes, most of them cache misses on a large database. Valid for the view generation gen;
 * each half is filled on first use. */
typedef struct answer_geo_entry {
    uint64_t gen;
    uint8_t addr[16];
    uint8_t family;
    bool have_geo;
    bool have_asn;
    uint8_t asn_prefix;
    uint32_t asn;
    geoip_result_t geo;
    float loc[3]; /* geo's coordinates as a unit vector, when geo.has_location */
} answer_geo_entry_t;

/* Entries per worker: 16384 of 64 bytes (1 MiB), direct-mapped by a hash of the address: room
 * for the few thousand resolvers that send most of an authoritative server's queries, with few
 * collisions. */
#define ANSWER_GEO_CACHE 16384

/* Per-worker scratch; big enough to keep off the stack of the I/O loop. */
typedef struct answer_ctx {
    wire_query_t query; /* answer_query()'s parse */
    wire_query_t *q;    /* the query being answered (answer_parsed()'s) */
    wire_writer_t writer;
    dname_view_t chase; /* CNAME target being followed */
    /* The negative answers' SOA: views of its RDATA's two names (MNAME, RNAME), kept with the
     * bytes they were made from and used only while the SOA being written has those bytes (an
     * NXDOMAIN flood writes the same SOA every time; another zone's makes them again). */
    struct {
        uint16_t len; /* bytes of names[], 0: none yet */
        uint8_t names[2 * DNAME_MAXLEN];
        dname_view_t view[2];
    } soa;
    /* The negative answers' SOA rendered ahead, for the usual negative answer (unsigned, the
     * SOA the first record after the question): its bytes after the owner, with where its
     * compression pointers go, which depends only on where the zone's apex sits in the question
     * (answer_put.c put_neg_tpl()). Kept with what it was made from (TTL, RDATA, apex) and made
     * again when another SOA is written. */
    struct answer_negt {
        uint32_t ttl;
        uint16_t rdlen;   /* of rdata[]; 0: none yet */
        uint8_t apex_len; /* of apex[] */
        bool ok;          /* the SOA could be rendered ahead (its names parse) */
        uint8_t rdata[2 * DNAME_MAXLEN + 20];
        uint8_t apex[DNAME_MAXLEN];
        uint16_t len; /* bytes of rr[]: TYPE, CLASS, TTL, RDLENGTH, RDATA */
        uint8_t rr[10 + 2 * DNAME_MAXLEN + 20];
        uint8_t nptr;
        uint16_t ptr_at[2]; /* where in rr[] a compression pointer goes */
        uint16_t ptr_to[2]; /* to this offset in the apex (ptr_rec 0) or in the record, whose
                               2-byte owner pointer comes first (ptr_rec 1) */
        uint8_t ptr_rec[2];
        /* MNAME's and RNAME's label just above the apex (lowercased, with its length byte)
         * when the name is below the apex: a question whose label there is the same shares
         * more than the apex with it, and the generic writer would point further. [i][0] 0:
         * none. */
        uint8_t guard[2][64];
    } negt;
    bool neg_plain; /* for tests: never the template (the generic writer's bytes to compare) */
    /* RDATA (u16 length + name) of the CNAMEs synthesised from DNAMEs; two, because a name
     * synthesised from the previous one is built from its labels */
    uint8_t synth[2][2 + DNAME_MAXLEN];
    dname_view_t parent; /* DS at a zone apex: the parent name, to find the parent zone */
    answer_info_t info;
    const answer_view_t *view; /* the snapshot of the query being answered */
    /* `ternctl explain`'s record of the decisions (tern/answer/answer_trace.h); NULL on the
     * workers, where every hook is one predicted branch on it */
    struct answer_trace *trace;
    /* Geo (select.h): the client the decisions are about (the ECS address when the query
     * carries a usable one, else the packet's source), its entry in the per-worker cache of
     * what was looked up for it, and the ECS scope this query's lookups imply. */
    uint64_t rng;      /* per-worker PRNG state (answer_ctx_seed) */
    int client_family; /* AF_INET, AF_INET6, or 0 = unknown */
    uint8_t client_addr[16];
    uint8_t scope;           /* in bits of the client's family as looked up (IPv4 for mapped) */
    bool client_mapped;      /* the client was an IPv4-mapped IPv6 address, looked up as IPv4 */
    answer_geo_entry_t *ent; /* the client's entry in geo_cache; NULL until a steered RRset
                                asks (then resolved from q_ecs / q_src) */
    const wire_ecs_t *q_ecs; /* this query's usable ECS option, or NULL */
    /* Limits (tern/limit/limit.h): the worker sets the clock once per batch; lc is the query's
     * client as the limits see it (set when v->limit is) */
    int64_t now_us; /* monotonic microseconds */
    uint32_t now_s; /* Unix seconds (cookie timestamps) */
    limit_client_t lc;
    limit_worker_t lim;
    const struct sockaddr *q_src; /* this query's source address, or NULL */
    /* DNSSEC (tern/dnssec/dnssec_zone.h): this worker's signer and signature cache (NULL: the
     * signatures made ahead only), and room for one RRSIG and one NSEC being written */
    dnssec_worker_t *dnssec;
    uint8_t sigbuf[DNSSEC_ZONE_SIGNERS_MAX * (2 + DNSSEC_RRSIG_MAX)]; /* one per zone signer */
    uint8_t nsecbuf[2 + DNSSEC_NSEC_MAX];
    answer_geo_entry_t geo_cache[ANSWER_GEO_CACHE];
    uint16_t cand[UINT16_MAX]; /* candidate RR indexes of one steered RRset */
    /* Load shedding (answer/steer_shed.c): the weight the weighted and sticky orders read for
     * each candidate of an RRset with a "shed" block, by record index (scaled down between the
     * watermarks); filled by the shed step for the candidates it keeps, unused otherwise */
    uint32_t wscaled[UINT16_MAX];
    uint32_t offs[UINT16_MAX]; /* RDATA offsets of the chosen RRs, in answer order */
} answer_ctx_t;

/**
 * Answer the query in pkt[0..len) from snapshot v into out (capacity out_cap, at least 65535 for
 * TCP and at least v->cfg.edns_max_udp for UDP). client is the packet's source address (AF_INET
 * or AF_INET6; NULL or another family: unknown), used by geo-steered RRsets unless the query's
 * EDNS Client Subnet option gives a non-zero source prefix. Returns the response length, or 0
 * when nothing must be sent (malformed beyond reply, QR set). v->table may be NULL (no zones:
 * everything REFUSED).
 */
size_t answer_query(const answer_view_t *v, answer_ctx_t *ctx, const struct sockaddr *client,
                    const uint8_t *pkt, size_t len, uint8_t *out, size_t out_cap,
                    answer_transport_t transport);

/**
 * answer_query() in two halves, for a batch: wire_parse_query() every query of it first (into a
 * wire_query_t of the caller's per query), answer_prefetch() over the lot, then
 * answer_parsed() each with its own parse and result. The response is byte for byte
 * answer_query()'s.
 */
size_t answer_parsed(const answer_view_t *v, answer_ctx_t *ctx, wire_query_t *q,
                     wire_parse_result_t pr, const struct sockaddr *client, const uint8_t *pkt,
                     size_t len, uint8_t *out, size_t out_cap, answer_transport_t transport);

/**
 * Where the ANAME target's A or AAAA (qtype) resolution leaves the zones of t, as the query path
 * walks it (CNAMEs and ANAMEs at the target followed): 1 with the lowercased name in out (room
 * for DNAME_MAXLEN bytes) when the resolver must get it upstream, 0 when t answers it. For the
 * loader, which hands those names to the resolver thread (answer_resolve.c).
 */
int answer_aname_exit(const zone_table_t *t, const uint8_t *target, uint16_t qtype, uint8_t *out);

/* The most queries one answer_prefetch() call looks at; the rest of a longer batch is not
 * prefetched. */
#define ANSWER_PREFETCH_MAX 64

/**
 * Warm the cache lines answer_parsed() will read first for each of the n parsed queries qs[i]
 * (as wire_parse_query() left them), before any of them is answered: the name-index slot of the
 * name in its zone (and of the first step of the walk a missing name takes), then the node it
 * names, then the node's name and RRsets, then the RDATA asked for. Each stage issues its loads
 * for every query before the next stage waits on any, so a batch's cache misses overlap instead
 * of following one another query by query. Only a hint: it writes nothing but its own stack.
 */
void answer_prefetch(const answer_view_t *v, const wire_query_t *qs, unsigned n);

#endif
