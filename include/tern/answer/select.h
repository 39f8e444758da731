/*
 * select.h — geo-steered answers: which RRs of a steered A/AAAA RRset a client gets, and in
 * what order (redins' filters, with the improvements the README lists).
 *
 * Pipeline per RRset, all over the RRset's indexes in a per-worker scratch array:
 *   0. health (only RRsets with health checks): keep the records of the highest health rank
 *      present — redins' FilterHealthcheck; when every record is down, all of them (fail open,
 *      counted in answer_info_t.health_fail_open). One relaxed byte load per record. The
 *      filters below then run on what is left, as in redins (a down record in the client's
 *      country falls back like a record of another country);
 *   1. filter (zone_geo_filter_t), each step keeping the records that match the client, else
 *      those that list nothing (redins' fallback: no country / "" / ASN 0), else all:
 *        country      — records whose country list holds the client's country;
 *        asn          — the same with the client's ASN;
 *        asn+country  — asn, then country among what asn left;
 *        location     — the records nearest the client (largest dot product of unit vectors,
 *                       ties kept); records without a location only when none has one; an
 *                       unlocated client keeps all;
 *        latency      — the records of the group with the lowest latency from the client's
 *                       network in the latency map (steer_latency.h), else location;
 *   2. shed (an RRset with a "shed" block, steer_shed.h): records at or above their high
 *      load watermark are left out while another stays below it; between the watermarks the
 *      weight the order reads is scaled down (or, for none/rr, the record drawn out);
 *   3. failover tiers (issue 33, steer_tier.h; only RRsets whose records carry priorities or
 *      that give min_healthy, zone_geo_t.tiers): the best-priority tier with at least
 *      min_healthy of what is left; none: the fullest; every record down: the best priority;
 *   4. order: none → the first remaining record; rr → one uniformly at random; weighted → one
 *      with probability weight / sum (all zero: uniform); sticky → by a weighted rendezvous hash
 *      of the client's network (steer_sticky.h: the same records for every client of it, the
 *      ECS scope widened to the prefix hashed);
 *   5. count: single → that one record; multi → all remaining, rotated to start with it (sticky:
 *      all of them in the client's hash order).
 * The orders read weights through cand_weight() (select_int.h), shed-scaled when shed ran.
 * The client's country/location (MaxMind DB) and ASN (asn_table) are looked up at most once per
 * query, only when a filter needs them, and kept in a per-worker cache by address (answer.h;
 * an entry is valid for one view generation, so a reload that swaps a database empties it).
 * ctx->scope collects the longest prefix any of those lookups depended on: the EDNS Client Subnet
 * scope of the response (RFC 7871 §7.2.1).
 *
 * Threading: per worker (ctx holds the PRNG and scratch); reads only the immutable view.
 * No allocation, no lock, no syscall.
 */
#ifndef TERN_ANSWER_SELECT_H
#define TERN_ANSWER_SELECT_H

#include <stdint.h>

#include "tern/answer/answer.h"

/**
 * Choose the RRs of steered RRset g (of an RRset whose RDATA offsets g->rr[i].off index) for the
 * client in ctx. Writes their RDATA offsets in answer order to offs (room for g->count) and
 * returns how many (>= 1 when g->count >= 1).
 */
unsigned answer_select(answer_ctx_t *ctx, const answer_view_t *v, const zone_geo_t *g,
                       uint32_t *offs);

/** Seed the per-worker PRNG (any value; 0 is remapped). Workers seed with distinct values. */
void answer_ctx_seed(answer_ctx_t *ctx, uint64_t seed);

/** Set the client for the next answer_select() calls without answer_query() (tests, bench):
 * family AF_INET (4 bytes) or AF_INET6 (16 bytes, v4-mapped ones become IPv4), or 0 = unknown.
 * Resets the scope; the cached lookups of that address stay valid for the same view. */
void answer_set_client(answer_ctx_t *ctx, int family, const uint8_t *addr);

#endif
