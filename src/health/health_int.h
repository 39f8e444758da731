/*
 * health_int.h — private to the registry (src/health) and its one friend, the checker
 * (src/checker: health_check.c schedules endpoints by these fields, health_redis.c keys their
 * shared state): the endpoint and registry as they see them. The workers and every other module
 * know only health.h.
 *
 * Every field of struct ep but pub.rank is guarded by the registry's mutex; pub.rank is written
 * (atomically) only under it and read by workers without it. The checker takes a reference to
 * an endpoint for as long as a check of it is in flight, so a reload that drops the endpoint's
 * last zone never frees it under the checker.
 */
#ifndef TERN_HEALTH_HEALTH_INT_H
#define TERN_HEALTH_HEALTH_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "tern/health/health.h"

/* The longest Redis key of an endpoint: prefix words, a host of 253 characters, an address. */
#define HEALTH_RKEY_MAX 384
/* Why the last check failed, as logged and listed. */
#define HEALTH_ERROR_MAX 160

struct ep {
    health_ep_t pub; /* first: zones point at it */
    health_registry_t *reg;
    struct ep *hnext;       /* hash chain */
    struct ep *prev, *next; /* every endpoint, creation order */
    uint64_t hash;
    uint32_t refs;
    health_spec_t spec; /* uri and host point into strs */
    char *strs;
    /* The key its state has in Redis, without the configured prefix and suffix:
     * redins:healthcheck:<host>.:<ip> for what redins checks too (http, https, icmp with a
     * host), tern:healthcheck:<proto>:<host|->:<ip>:<port> otherwise, so that a redins node
     * reading redins:healthcheck:* never meets a check it cannot make. */
    const char *rkey; /* in strs; at most HEALTH_RKEY_MAX - 1 bytes */
    bool redins_key;
    char addr_text[48]; /* the address as text (inet_ntop) */

    int16_t status;
    uint8_t override; /* health_override_t */
    bool checked;     /* a result is known */
    bool last_ok;
    bool last_remote;
    bool in_flight;      /* the checker holds it (and a reference) */
    int64_t due_ms;      /* monotonic: when the checker next looks at it */
    int64_t last_check;  /* wall clock ms of the last result, own or adopted */
    uint32_t latency_us; /* of the last own check */
    int64_t load_ms;     /* monotonic: when pub.load was last written by a check; 0 = never */
    uint64_t checks, failures;
    char error[HEALTH_ERROR_MAX];
};

struct ovr {
    struct ovr *next;
    uint8_t family;
    uint8_t addr[16];
    uint16_t port; /* 0 = every port */
    uint8_t state; /* health_override_t, never HEALTH_AUTO (removed instead) */
};

struct health_registry {
    pthread_mutex_t mu;
    struct ep **buckets;
    size_t nbuckets, count;
    struct ep *head, *tail;
    struct ovr *ovr;
    /* Called (under mu) when an endpoint appears or an override changes, so the checker looks
     * at once instead of at its next tick. */
    void (*wake)(void *ctx);
    void *wake_ctx;
};

static inline struct ep *ep_of(health_ep_t *p)
{
    return (struct ep *)p;
}

/** Record one own result of e (under mu): move the counter as redins does, set the rank, log a
 * change of state. err is the reason of a failure ("" or NULL on success). */
void health_ep_result(struct ep *e, bool ok, const char *err, uint32_t latency_us, int64_t wall_ms);

/** Take another node's result from Redis (under mu): its counter (clamped to e's bounds) and
 * time; logs a change of state like an own result. */
void health_ep_adopt(struct ep *e, int status, int64_t wall_ms, const char *err);

/** The state name of e ("up", "down", "unknown", "failing", "recovering"). Under mu. */
const char *health_ep_state(const struct ep *e);

/** Unlink and free e (under mu, refs 0). */
void health_ep_destroy(struct ep *e);

#endif
