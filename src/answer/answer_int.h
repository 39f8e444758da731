/*
 * answer_int.h — what the answer stages share (private to src/answer): one query's response on
 * its way through policy → dispatch → resolve → finish (answer.h), and the writer the resolve
 * stage puts RRsets with.
 *
 * Lifecycle: answer_parsed() (answer.c) keeps one answer_resp_t on its stack for one query;
 * each stage fills the fields it owns (marked below) and later stages only read them. Nothing
 * here outlives the query; the per-worker state stays in answer_ctx_t (answer.h).
 *
 * Threading: one worker, one query at a time; no allocation, lock or syscall.
 */
#ifndef TERN_ANSWER_ANSWER_INT_H
#define TERN_ANSWER_ANSWER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/answer/answer.h"
#include "tern/zone/zone.h"

/* Plain DNS over UDP: RFC 1035 §4.2.1 limits a message to 512 bytes without EDNS, and RFC 6891
 * §6.2.5 treats smaller advertised sizes as 512. */
#define UDP_MIN 512u

/* Compression pointers carry a 14-bit offset (RFC 1035 §4.1.4): a CNAME target written beyond
 * it in a large TCP response is repeated by value instead of pointed at. */
#define PTR_MAX_OFF 0x3FFFu

/* Offset of the question name in every message (right after the 12-byte header). */
#define QNAME_OFF WIRE_HDR_LEN

typedef struct answer_resp answer_resp_t;

/* Whether zone z is hidden from this query's client: the policy stage's answer (its per-zone
 * ACL), which resolve asks when a CNAME chain or an ANAME target crosses into another zone. */
typedef bool (*answer_hidden_fn)(const answer_resp_t *r, const zone_t *z);

struct answer_resp {
    /* the query (answer.c) */
    answer_ctx_t *ctx;
    const answer_view_t *v;
    wire_query_t *q;
    wire_parse_result_t pr;
    answer_transport_t transport;
    const struct sockaddr *client;
    uint8_t *out;
    size_t out_cap;
    bool edns;             /* the response carries an OPT (cleared if its room is not there) */
    const wire_ecs_t *ecs; /* the query's usable ECS option, or NULL */
    uint16_t adv;          /* the UDP payload size we advertise */

    /* policy (answer_policy.c; answer_parsed() starts them as "no verdict", and they stay so
     * when the view has no limits, the stage is not run then) */
    bool refused;            /* the client is refused (ACL, blacklist, rate) */
    bool cookie_ok;          /* the query's server cookie is valid */
    bool badcookie;          /* answer BADCOOKIE (cookies required over UDP) */
    bool tc_only;            /* answer TC alone: no cookie at all, cookies required over UDP */
    uint8_t zone_vd;         /* limit_verdict_t of the ACL of the zone of the name asked; it
                                counts only for a query the dispatch stage sends to resolve */
    answer_hidden_fn hidden; /* NULL: every zone is visible to this client */
    bool looked;             /* the name asked was looked up for its zone's ACL: */
    const zone_t *look_zone; /* its zone (NULL: none), handed to resolve, */
    zone_lookup_t look;      /* and the name in it */
    size_t cookie_len;       /* bytes of cookie[] (0: no COOKIE option in the response) */
    uint8_t cookie[WIRE_COOKIE_CLIENT + LIMIT_SERVER_COOKIE_LEN];

    /* the response (opened by answer_finish_open(), filled by dispatch and resolve) */
    wire_writer_t *w;
    size_t limit;        /* the response's size limit */
    bool rrl;            /* RRL judges the finished response */
    const zone_t *zone;  /* resolve: the zone of the RRsets being written (geo data, signing) */
    const zone_t *asked; /* the zone of the name asked, for answer_info_t.zone */
    unsigned rcode;
    bool aa;
    bool tc;
    bool drop; /* a zone's ACL says: no response at all */
    bool sign; /* DO=1: RRsets of signed zones go with their RRSIGs */
    bool wild; /* the RRsets being written are synthesised from a wildcard: signed per query as
                  the name asked (dnssec_zone.h) */
};

/* What the resolve stage answered: the finish stage derives the RRL class from it, once. */
typedef enum {
    ANSWER_RES_NONE = 0, /* nothing to class by: an error, a CNAME loop or limit, no room */
    ANSWER_RES_ANSWER,   /* data for the name asked (a chain that leaves our zones too) */
    ANSWER_RES_NODATA,   /* no data of that type at the name asked */
    ANSWER_RES_NXDOMAIN, /* no such name in at.zone */
    ANSWER_RES_REFERRAL, /* a referral to the delegation point at.owner */
    ANSWER_RES_WILDCARD, /* data synthesised from the wildcard at.owner */
} answer_res_kind_t;

typedef struct answer_res {
    answer_res_kind_t kind;
    union {
        const zone_t *zone;   /* NXDOMAIN */
        const uint8_t *owner; /* REFERRAL, WILDCARD: a name of the zone's data */
    } at;
} answer_res_t;

/* Where dispatch sends a query. */
typedef enum {
    ANSWER_ROUTE_FINISH,  /* answered already (an rcode, TC, CHAOS): on to finish */
    ANSWER_ROUTE_RESOLVE, /* a question for the zones: resolve, then finish */
    ANSWER_ROUTE_HANDOFF, /* for the transfer thread: nothing is written */
} answer_route_t;

/* ---- the stages ---- */

/**
 * Policy, for a view with limits (v->limit): the client's ACL, blacklist and rate
 * (limit_client), its DNS cookie, and the ACL of the zone of the name asked (looked up here
 * then, and handed to resolve). Returns false when the query is dropped (info.outcome set); the
 * other verdicts are left in r for dispatch.
 */
bool answer_policy(answer_resp_t *r);

/**
 * Dispatch: what the request is (parse errors, opcode, class, meta types) and where it goes —
 * answered here with an rcode or TC, handed to the transfer thread, or resolved. Applies the
 * policy's verdicts in their order of precedence.
 */
answer_route_t answer_dispatch(answer_resp_t *r);

/**
 * Resolve: RFC 1034 §4.3.2 over the view's zones, from the policy's lookup of the name asked
 * if it made one, following CNAMEs, DNAMEs and ANAMEs; writes the answer through answer_put_*() and
 * says what it was.
 */
answer_res_t answer_resolve(answer_resp_t *r);

/**
 * Finish, opening half: the header and question in the output, room for the OPT reserved
 * before any RRset, the DO bit and RRL armed (its bucket prefetched). Before dispatch.
 */
void answer_finish_open(answer_resp_t *r);

/**
 * Finish: the OPT, the RRL verdict on the finished UDP response (its class derived from res),
 * answer_info_t's last fields. Returns the response length, 0 when it is dropped.
 */
size_t answer_finish(answer_resp_t *r, answer_res_t res);

/* ---- resolve's lookups (answer_resolve.c) ---- */

/**
 * Find the zone for v and look v up in it (a DS at a zone apex in the parent we also serve,
 * RFC 4035 §3.1.4.1). NULL when no zone of t contains v. Uses ctx->parent.
 */
const zone_t *answer_resolve_lookup(answer_ctx_t *ctx, const zone_table_t *t, const dname_view_t *v,
                                    uint16_t qtype, zone_lookup_t *res);

/* ---- resolve's writer, DNSSEC included (answer_put.c) ---- */

/* Which targets of an NS/MX/SRV RRset answer_put_additional() writes. */
typedef enum {
    ANSWER_ADD_ANSWER,  /* after an answer: our authoritative data only (no names below a cut) */
    ANSWER_ADD_GLUE,    /* a referral's in-domain glue: names at or below its cut (RFC 9471:
                           must fit, else TC) */
    ANSWER_ADD_SIBLING, /* a referral's other in-zone targets (sibling glue, authoritative
                           names): optional, dropped without TC */
} answer_add_t;

/**
 * Write RRset rr (its steering, if any, from zone gz) owned by owner (at owner_off in the
 * message, 0: written from owner) with TTL ttl to the answer or authority section; a miss sets
 * TC (RFC 2181 §9) and returns false. With DO=1 in a signed zone its RRSIGs follow: made ahead,
 * or per query for a steered subset and for an RRset synthesised (synth).
 */
bool answer_put_as(answer_resp_t *r, wire_section_t sec, uint16_t owner_off, const uint8_t *owner,
                   const zone_t *gz, const zone_rrset_t *rr, uint32_t ttl, bool synth);

/* An RRset of the zone being written, as it is (a wildcard's synthesised per query). */
static inline bool answer_put(answer_resp_t *r, wire_section_t sec, uint16_t owner_off,
                              const uint8_t *owner, const zone_rrset_t *rr)
{
    return answer_put_as(r, sec, owner_off, owner, r->zone, rr, rr->ttl, r->wild);
}

/**
 * The RRSIG of count RRs of rdata (picked by offs if not NULL) at owner, made per query (or
 * taken from the worker's cache) and written after them. Without a signer, or if signing
 * fails, the RRset goes unsigned. False when it did not fit (TC).
 */
bool answer_put_online(answer_resp_t *r, wire_section_t sec, uint16_t owner_off,
                       const uint8_t *owner, uint16_t type, uint32_t ttl, uint16_t count,
                       const uint8_t *rdata, const uint32_t *offs);

/**
 * A/AAAA of the targets of NS/MX/SRV RRset rr (of zone z) that mode selects; cut is the
 * referral's delegation point (GLUE, SIBLING). False when an RRset did not fit: for GLUE that
 * sets TC (RFC 9471 §3), otherwise the additional section just stops (RFC 2181 §9).
 */
bool answer_put_additional(answer_resp_t *r, const zone_t *z, const zone_rrset_t *rr,
                           answer_add_t mode, const zone_node_t *cut);

/**
 * The zone's negative-answer SOA (TTL already min(TTL, MINIMUM)) in authority: RFC 2308 §3.
 * Signed, the proof follows: an NSEC at the name (owner, written at owner_off) with node n's
 * types, or NXNAME when n is NULL (and the rcode becomes NOERROR, RFC 9824 §3).
 */
void answer_put_neg(answer_resp_t *r, const zone_t *z, uint16_t owner_off, const uint8_t *owner,
                    const zone_node_t *n);

/**
 * Referral (RFC 1034 §4.3.2 step 3b): the cut's NS in authority (signed: with the DS or the
 * proof there is none), then the glue below the cut (all of it or TC, RFC 9471), then in-zone
 * addresses of the other name servers if they fit.
 */
void answer_put_referral(answer_resp_t *r, const zone_t *z, const zone_node_t *cut);

#endif
