/*
 * limit.h — flood resistance: access lists, redins' per-client rate limit, response rate limiting
 * (RRL, as Knot and BIND do it), DNS Cookies (RFC 7873 with RFC 9018 server cookies), and TCP
 * connections per client.
 *
 * Two objects:
 *   - limit_shared_t, one per process, owned by the loader: the state every worker shares and that
 *     outlives reloads — the rate tables (fixed-size, lock-free: one 16-byte bucket per key, its
 *     state one 64-bit word updated with compare-and-swap), the TCP connection counts, the cookie
 *     secrets (RCU-published, rotated by the limit thread) and one log ring per worker; plus the
 *     "tern-limit" thread that writes the log lines of newly limited prefixes (rate-limited) and
 *     rotates the cookie secret.
 *   - limit_t, the immutable policy of one view (built by the loader from the config, published
 *     with the view, freed after the grace period): lists compiled to sorted ranges, per-zone
 *     access lists by apex, the rates as GCRA intervals.
 *
 * Decisions, per query, in answer_query(): limit_client() before anything (ACL, blacklist,
 * whitelist, redins' rate: REFUSED or drop), limit_zone() once the zone is known (its ACL), the
 * cookie check on the query's COOKIE option, and limit_rrl() on the finished UDP response
 * (pass, drop, or slip: the response truncated with TC so a real client retries over TCP).
 * A client spread over several workers by SO_REUSEPORT meets one bucket: the tables are shared,
 * so the effective limit is the configured one (not N times it) whatever the worker count.
 *
 * Rates are GCRA (the generic cell rate algorithm): a bucket keeps the theoretical arrival time
 * (TAT) of the next allowed event; an event at time t is allowed when max(TAT, t) - t <= tau, and
 * then moves TAT to max(TAT, t) + T. T is the interval (1 s / rate) and tau the burst tolerance:
 * redins' limiter is exactly this with T = 60 s / rate and tau = burst x T (so burst + 1 requests
 * pass at once); RRL uses tau = (burst - 1) x T.
 *
 * Threading: the query-side functions run on workers: no lock, no allocation, no system call (the
 * caller passes the time). The tables tolerate races by design: two workers may both pass the
 * last allowed event, or one may evict a bucket another is using; a limiter's error, never
 * memory unsafety (every access is atomic). Everything else runs on the loader thread.
 */
#ifndef TERN_LIMIT_LIMIT_H
#define TERN_LIMIT_LIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "tern/common/compiler.h"
#include "tern/limit/limit_settings.h"

typedef enum { LIMIT_PASS = 0, LIMIT_REFUSE, LIMIT_DROP, LIMIT_SLIP } limit_verdict_t;

/* Why a query was refused or dropped, for the counters. */
typedef enum {
    LIMIT_WHY_NONE = 0,
    LIMIT_WHY_ACL,       /* the global ACL */
    LIMIT_WHY_ZONE_ACL,  /* the zone's ACL */
    LIMIT_WHY_BLACKLIST, /* redins' blacklist */
    LIMIT_WHY_RATE,      /* redins' per-client rate */
    LIMIT_WHY_RRL,       /* response rate limiting */
} limit_why_t;

/* RRL response classes (what makes two responses "the same"). */
typedef enum {
    LIMIT_RC_ANSWER = 0, /* positive answer: the name and type asked */
    LIMIT_RC_NODATA,     /* NOERROR without data: the name asked */
    LIMIT_RC_NXDOMAIN,   /* NXDOMAIN: the zone */
    LIMIT_RC_REFERRAL,   /* a referral: the delegation point */
    LIMIT_RC_WILDCARD,   /* an answer synthesised from a wildcard: the wildcard */
    LIMIT_RC_ERROR,      /* any error rcode: the prefix alone */
    LIMIT_RC_COUNT
} limit_class_t;

/* A client address as the limits see it: IPv4-mapped IPv6 as IPv4. */
typedef struct limit_client {
    uint8_t family; /* 4 or 6; 0 = unknown (nothing applies) */
    uint8_t addr[16];
} limit_client_t;

/* RFC 9018 server cookie: version 1, 3 reserved, 4 timestamp, 8 hash. */
#define LIMIT_SERVER_COOKIE_LEN 16
#define LIMIT_CLIENT_COOKIE_LEN 8

typedef struct limit_shared limit_shared_t;
typedef struct limit limit_t;

/* Per-worker state of the query-side functions (in the worker's answer context). */
typedef struct limit_worker {
    unsigned id;      /* the worker's index: its log ring */
    uint32_t limited; /* RRL-limited responses so far: every slip-th one slips */
    /* prefixes this worker reported as newly limited lately (a few, overwritten in turn), so
     * a flood reports its prefix once, not once per response */
    uint64_t reported[8];
    int64_t reported_at[8];
    unsigned next_report;
} limit_worker_t;

/** The shared state for `workers` workers (log rings). NULL when out of memory. */
limit_shared_t *limit_shared_new(unsigned workers) TERN_WUR;

/** Stop the thread and free everything; no worker may use it any more. NULL is a no-op. */
void limit_shared_free(limit_shared_t *sh);

/** Start the limit thread (log lines, cookie secret rotation). 0 or a negative code (logged). */
int limit_shared_start(limit_shared_t *sh) TERN_WUR;

/**
 * The policy of set for a new view (loader thread; conf's config_limit_new() gathers set from a
 * config_t): compiles the lists, allocates the shared
 * tables the first time a feature needs them (their sizes then hold until restart: a changed
 * table_size is logged), sets the TCP cap (restart-only) and the cookie secret (a configured
 * secret replaces the current one, which stays valid an hour as the previous one). Returns NULL
 * when nothing is configured (no limit applies; the query path skips every step), or with *rc
 * set to TERN_ENOMEM.
 */
limit_t *limit_new(limit_shared_t *sh, const limit_settings_t *set, int *rc) TERN_WUR;

/** Free a policy (after the grace period). NULL is a no-op. */
void limit_free(limit_t *l);

/** The client of a packet source (AF_INET or AF_INET6; else family 0). */
void limit_client_of(limit_client_t *c, const struct sockaddr *src);

/**
 * The global access list, redins' blacklist and whitelist, and redins' rate, in that order, for
 * one query at now_us (monotonic). LIMIT_PASS, LIMIT_REFUSE or LIMIT_DROP; *why says which rule.
 */
limit_verdict_t limit_client(const limit_t *l, const limit_client_t *c, int64_t now_us,
                             limit_why_t *why);

/** limit_client() without charging the rate: whether this query would pass now, the rate's
 * bucket left as it was (`ternctl explain`). */
limit_verdict_t limit_client_dry(const limit_t *l, const limit_client_t *c, int64_t now_us,
                                 limit_why_t *why);

/** The access list of the zone at apex (lowercased wire name, its dname hash), if it has one. */
limit_verdict_t limit_zone(const limit_t *l, const uint8_t *apex, uint32_t apex_hash,
                           const limit_client_t *c);

/** Which rule of an access list refuses client c — the global one (apex NULL) or the zone's at
 * apex — as a static phrase ("the client is in its deny list", "... not in its allow list"), or
 * NULL when that list lets it through (`ternctl explain`). */
const char *limit_acl_rule(const limit_t *l, const limit_client_t *c, const uint8_t *apex,
                           uint32_t apex_hash);

/** Whether RRL is on (and the client not whitelisted): the caller then classifies its
 * response and asks limit_rrl(). */
bool limit_rrl_applies(const limit_t *l, const limit_client_t *c);

/**
 * RRL for one UDP response of class cls keyed by name_hash (and qtype for answers), at now_us:
 * LIMIT_PASS, LIMIT_DROP, or LIMIT_SLIP (send it truncated). A newly limited prefix is put in the
 * worker's log ring (no formatting here).
 */
limit_verdict_t limit_rrl(const limit_t *l, limit_worker_t *w, const limit_client_t *c,
                          limit_class_t cls, uint32_t name_hash, uint16_t qtype, int64_t now_us);

/** limit_rrl() without charging, reporting or counting toward slip: LIMIT_PASS, or LIMIT_DROP
 * when the response would be limited (dropped or slipped) now (`ternctl explain`). */
limit_verdict_t limit_rrl_dry(const limit_t *l, const limit_client_t *c, limit_class_t cls,
                              uint32_t name_hash, uint16_t qtype, int64_t now_us);

/**
 * Start loading the RRL bucket a positive answer to (name_hash, qtype) from c would use, so that
 * limit_rrl() finds it in cache after the answer is built (the common class; a miss costs a
 * useless prefetch). Only when limit_rrl_applies().
 */
void limit_rrl_prefetch(const limit_t *l, const limit_client_t *c, uint32_t name_hash,
                        uint16_t qtype);

/** Whether DNS Cookies are on; whether a valid server cookie is required over UDP. */
bool limit_cookies(const limit_t *l);
bool limit_cookies_required(const limit_t *l);

/**
 * Whether the server cookie (len bytes, after the client cookie cc) of a query from c is one this
 * server (or a fleet sharing its secret) made: RFC 9018 version 1, timestamp within an hour in the
 * past and 5 minutes in the future of now (Unix seconds), hash of the current or previous secret.
 */
bool limit_cookie_valid(const limit_t *l, const uint8_t *cc, const uint8_t *server, size_t len,
                        const limit_client_t *c, uint32_t now);

/** A fresh RFC 9018 server cookie for client cookie cc from c at now (Unix seconds). */
void limit_cookie_make(const limit_t *l, const uint8_t *cc, const limit_client_t *c, uint32_t now,
                       uint8_t out[LIMIT_SERVER_COOKIE_LEN]);

/**
 * TCP: take one of the connections client c may hold (all workers together), false when it holds
 * tcp_max_per_client already. Each true is paired with one limit_tcp_release(). sh may be NULL
 * (no cap).
 */
bool limit_tcp_acquire(limit_shared_t *sh, const limit_client_t *c);
void limit_tcp_release(limit_shared_t *sh, const limit_client_t *c);

/** Set the TCP cap (startup: tcp_max_per_client and the client prefix lengths). */
void limit_shared_set_tcp(limit_shared_t *sh, unsigned cap, unsigned prefix_v4, unsigned prefix_v6);

/** SipHash-2-4 of n bytes with a 16-byte key (the RFC 9018 hash; exported for its tests). */
uint64_t limit_siphash24(const uint8_t key[16], const void *data, size_t n);

typedef struct limit_stats {
    uint64_t log_dropped; /* newly limited prefixes the rings could not take */
    uint64_t logged;      /* log lines written about limited prefixes */
    uint64_t rotations;   /* cookie secrets rotated */
} limit_stats_t;

void limit_shared_stats(limit_shared_t *sh, limit_stats_t *out);

/* ---- addresses, for the services that check peers off the query path (limit_addr.c) ---- */

/** Whether ss (IPv4-mapped IPv6 taken as IPv4) is in one of l's prefixes. */
bool limit_prefix_match(const config_prefix_list_t *l, const struct sockaddr_storage *ss);

/** "address@port" of ss into out, for logs and `ternctl zone`. */
void limit_addr_text(const struct sockaddr_storage *ss, char *out, size_t len);

#endif
