/*
 * aname_resolver.h — the ANAME resolver thread: keeps the A and AAAA of every out-of-zone ANAME
 * target fresh by asking upstream DNS servers, and publishes them as an immutable table
 * (zone/aname_results.h) that the query workers read.
 *
 * Owns: one thread, one ldns resolver per configured upstream (created and used by the thread
 * only), the set of targets with each (target, type)'s last answer and schedule. Nothing here runs
 * on a worker; workers see only published tables.
 *
 * Resolution (redins' handler/upstream.go, plus what an operator expects of a stub resolver):
 * each (target, type) is asked as an RD=1 query of the upstreams in order; the first that answers
 * NOERROR or NXDOMAIN wins and moves to the front (as redins does). A timeout, a network error,
 * SERVFAIL/REFUSED/any other rcode, an answer that does not match the question, a truncated
 * answer, a CNAME loop or chain longer than 16, or a referral (no answer, no SOA, NS in authority:
 * the upstream does not recurse) makes the next upstream be tried. From the answer the CNAME chain
 * is followed from the target inside the answer section, and the A/AAAA RRs owned by its end are
 * taken (sorted, duplicates dropped):
 *   NOERROR with such RRs → ANAME_OK, ttl = min TTL of the chain's CNAMEs and the RRs;
 *   NOERROR without       → ANAME_NODATA  } ttl = min(SOA TTL, SOA MINIMUM) of the authority
 *   NXDOMAIN              → ANAME_NXDOMAIN} SOA, else 60 s; capped by the chain's CNAME TTLs.
 * TTLs above 2^31 - 1 count as 0 (RFC 2181 §8).
 * When no upstream answers, the (target, type) keeps its previous state and data (a pending one
 * stays pending, an OK one keeps its last good answer), the failure is counted, and it is logged
 * once when the target starts failing (warning) and once when it answers again (info).
 *
 * Schedule: an answered (target, type) is asked again at 90% of its TTL, at least 1 s and at most
 * one day later; a failed one after 1 s, doubling up to 30 s while it keeps failing. New targets
 * are asked at once. Queries are sequential: at most one in flight, so a reload never floods an
 * upstream; a query waits at most (upstreams × timeout), doubled when a truncated UDP answer
 * falls back to TCP.
 *
 * Publishing: the thread calls the publish callback (on its own thread, without holding its lock)
 * with a new table — one entry per (target, A) and (target, AAAA), pending ones too — when
 * something a client could see changed (state, RR set or TTL), at most once per 100 ms (changes in
 * between are coalesced), and once after set_targets() changed the set.
 *
 * The first round: every (target, type) is asked once as soon as it appears; a table published
 * after the last of them was tried (answered or not) is marked aname_results_complete(), and so
 * is every table while no upstream is usable (nothing more can come). ternd holds READY for it.
 *
 * State file (aname_state.h; optional): read once when the thread starts, before its first
 * round; a saved answer for a current target that is not older than its TTL plus max_stale is
 * taken as that target's answer (TTL: what is left of it, or 30 s once it ran out, RFC 8767) and
 * published at once, then asked again like any other. Saved answers for names that are no
 * targets yet (a zone from Redis comes after the start) are kept, taken when set_targets() adds
 * the name, and written back until they are too old. The file is written by the thread, never
 * while it holds its lock, after the first round and then at most once a minute while answers
 * arrive (changed or confirmed), so it always holds each target's last good answer.
 *
 * Threading: configure(), set_targets(), set_state(), log_pending(), stats() and free() from any
 * thread. One mutex protects
 * the targets, the configuration and the counters between those callers and the resolver thread,
 * which never holds it while it waits on the network; it sleeps on a condition variable
 * (CLOCK_MONOTONIC) until the next query is due, and the calls above wake it.
 */
#ifndef TERN_SOURCE_ANAME_RESOLVER_H
#define TERN_SOURCE_ANAME_RESOLVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"
#include "tern/zone/aname_results.h"

/* Defaults for a zero port or timeout in aname_upstream_t. */
#define ANAME_UPSTREAM_PORT       53
#define ANAME_UPSTREAM_TIMEOUT_MS 400

typedef struct aname_upstream {
    char host[64];       /* numeric IPv4 or IPv6 address */
    uint16_t port;       /* default 53 (0 means the default) */
    bool tcp;            /* redins "protocol": "udp" | "tcp" */
    unsigned timeout_ms; /* redins "timeout" (ms), default 400 (0 means the default) */
} aname_upstream_t;

typedef struct aname_stats {
    uint64_t queries;   /* queries sent to upstreams (each upstream tried counts) */
    uint64_t failures;  /* (target, type) resolutions no upstream answered */
    uint64_t changes;   /* (target, type) answers that changed what a client sees */
    uint64_t publishes; /* tables handed to the publish callback */
    size_t targets;     /* distinct targets now */
    size_t pending;     /* of those, targets whose A or AAAA has never been answered */
} aname_stats_t;

/** Called on the resolver thread whenever the results changed; takes ownership of one reference
 * (release it with aname_results_release()). Never called with the resolver's lock held. */
typedef void (*aname_publish_fn)(void *ctx, aname_results_t *results);

typedef struct aname_resolver aname_resolver_t;

/** A resolver (not started, no upstreams, no targets) that publishes through fn(ctx, ...).
 * NULL when out of memory. */
aname_resolver_t *aname_resolver_new(aname_publish_fn fn, void *ctx) TERN_WUR;

/**
 * Use these upstreams (copied), tried in this order. May be called again while running (a
 * reload): when the list changed, the thread builds new resolvers before its next query and asks
 * every pending or failing (target, type) again at once. With no upstreams nothing is asked and
 * every target stays as it is. 0, or TERN_EINVAL when a host is not a numeric IPv4/IPv6 address
 * (nothing changed), or TERN_ENOMEM.
 */
int aname_resolver_configure(aname_resolver_t *r, const aname_upstream_t *ups, size_t n) TERN_WUR;

/**
 * The full set of out-of-zone targets (lowercased wire names; duplicates allowed; copied).
 * Targets kept keep their state and schedule; new ones start ANAME_PENDING and are asked at once;
 * removed ones are dropped. If the set changed, a new table is published. Any thread.
 * 0, TERN_EINVAL (a name that is not a valid wire name; nothing changed) or TERN_ENOMEM.
 */
int aname_resolver_set_targets(aname_resolver_t *r, const uint8_t *const *lcnames,
                               size_t n) TERN_WUR;

/**
 * Keep the results in the file at path (copied; NULL: none), and at start load those not older
 * than their TTL plus max_stale_s seconds. Call before start() for the load; later calls (a
 * reload) change where the next write goes. 0 or TERN_ENOMEM (nothing changed).
 */
int aname_resolver_set_state(aname_resolver_t *r, const char *path, uint32_t max_stale_s) TERN_WUR;

/** Log (warning) the targets that have no answer at all yet, a few by name, and how many
 * (target, type) pairs the first round has still to ask. Any thread. */
void aname_resolver_log_pending(aname_resolver_t *r);

/** Start the thread. 0, TERN_EINVAL if already started, or a negated errno (logged). */
int aname_resolver_start(aname_resolver_t *r) TERN_WUR;

/** A consistent copy of the counters. Any thread. */
void aname_resolver_stats(aname_resolver_t *r, aname_stats_t *out);

/** Stop and join the thread (a query in flight is finished first: at most upstreams × timeout),
 * then free everything. Tables already published stay valid. NULL is a no-op. */
void aname_resolver_free(aname_resolver_t *r);

#endif
