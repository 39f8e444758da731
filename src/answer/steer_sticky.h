/*
 * steer_sticky.h — the sticky order (issue 33, `"order": "sticky"`): every client network is
 * answered the same records, in the same order, by weighted rendezvous hashing (select.h, step 4).
 *
 * Owner: select.c calls it for an RRset whose policy.order is ZONE_GEO_ORDER_STICKY.
 * Threading: per worker; no allocation, lock or syscall.
 */
#ifndef TERN_ANSWER_STEER_STICKY_H
#define TERN_ANSWER_STEER_STICKY_H

#include <stdbool.h>
#include <stdint.h>

#include "tern/answer/answer.h"
#include "tern/answer/answer_trace.h"
#include "tern/zone/zone.h"

/** The client network hashed: family (AF_INET/AF_INET6, 0 unknown), the address truncated to
 * bits, and their 64-bit hash. */
typedef struct steer_sticky_net {
    int family;
    bool mapped; /* the address was IPv4-mapped IPv6, hashed as IPv4 */
    uint8_t bits;
    uint8_t addr[16];
    uint64_t hash;
} steer_sticky_net_t;

/** The client network the sticky order hashes for RRset policy p: the client's address (family
 * AF_INET or AF_INET6, an IPv4-mapped IPv6 address taken as IPv4; 0: unknown, addr unread;
 * mapped: an AF_INET addr that was IPv4-mapped already) truncated to the configured length (the
 * RRset's sticky_prefix, else cfg's), and to the source prefix of ecs when the query carries a
 * usable one (the client is then its address). */
void steer_sticky_net(int family, const uint8_t *addr, bool mapped, const wire_ecs_t *ecs,
                      const answer_config_t *cfg, const zone_geo_policy_t *p,
                      steer_sticky_net_t *net);

/** Record r's rendezvous score for network hash h with weight w (> 0): -ln(u) / w, u uniform
 * in (0, 1) from a hash of (h, r's identity). The lowest score wins. */
double steer_sticky_score(uint64_t h, uint32_t ident, uint32_t w);

/**
 * Order c[0..n) of g for network net: single, the lowest-scoring candidate is moved to c[0] (the
 * others left as they are); otherwise all of them in score order, using scratch (room for n
 * u32, e.g. the answer's offsets, which the caller writes afterwards). Records with weight 0 are
 * scored after every positive one; all zero weigh alike.
 */
void steer_sticky_order(const answer_ctx_t *ctx, const zone_geo_t *g, uint16_t *c, unsigned n,
                        const steer_sticky_net_t *net, bool single, uint32_t *scratch);

#endif
