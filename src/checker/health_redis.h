/*
 * health_redis.h — private to src/health: the checker's Redis connection for sharing endpoint
 * state with other nodes (tern or redins) in redins' keys. See health_check.h for the protocol.
 *
 * One connection (tern/redis/redis_conn.h, the zone source's type: with Sentinel it is the
 * primary Sentinel names, followed through a failover), used by the checker thread only. Every
 * call pipelines its commands (one round trip per call, whatever the number of endpoints) and
 * fails fast: on any error the connection is dropped and retried later with backoff, and the
 * caller goes on without Redis.
 */
#ifndef TERN_HEALTH_HEALTH_REDIS_H
#define TERN_HEALTH_HEALTH_REDIS_H

#include <stdbool.h>
#include <stdint.h>

#include "health_int.h"
#include "tern/redis/redis_settings.h"

typedef struct hredis hredis_t;

/** A disconnected client for r's settings (copied); connects on the first hredis_ready(). */
hredis_t *hredis_new(const config_redis_t *r) TERN_WUR;

/** Close and free. NULL is a no-op. */
void hredis_free(hredis_t *h);

/** Whether a connection is up, connecting first if none is and the backoff allows (blocking for
 * at most the connect timeout, and with Sentinel one query per sentinel). With Sentinel, while
 * connected, asks every 2 s whether the primary is still the one, and moves when it is not. */
bool hredis_ready(hredis_t *h, int64_t now_ms);

/** Whether a connection is up now (no attempt to make one). */
bool hredis_connected(const hredis_t *h);

/** Commands and connections that failed since the start. */
uint64_t hredis_errors(const hredis_t *h);

typedef enum {
    HREDIS_CHECK = 0, /* no fresh state, and the lock is ours: check it */
    HREDIS_ADOPT,     /* another node checked it within the interval: take its state */
    HREDIS_WAIT,      /* another node holds the lock: it is checking now */
} hredis_decision_t;

typedef struct hredis_state {
    hredis_decision_t decision;
    bool have_state;              /* a state was read (fresh or not): status and lastcheck below */
    int status;                   /* HREDIS_ADOPT: the counter */
    int64_t lastcheck;            /* HREDIS_ADOPT: wall clock ms of that check */
    char error[HEALTH_ERROR_MAX]; /* HREDIS_ADOPT: its error, if the node wrote one */
} hredis_state_t;

/**
 * For each endpoint of eps (n of them, their rkeys read without the registry's lock: rkeys never
 * change), decide as health_check.h says: GET every state key, then SET NX PX the lock of each
 * endpoint without a fresh state (ttl: its timeout + 2 s). now_wall in ms. Returns 0, or -1 when
 * Redis failed (out[] is then all HREDIS_CHECK: check locally).
 */
int hredis_claim(hredis_t *h, struct ep *const *eps, unsigned n, unsigned interval_ms,
                 int64_t now_wall, hredis_state_t *out);

/* One own result to publish. */
typedef struct hredis_result {
    const struct ep *e; /* referenced by the caller until hredis_publish() returns */
    int status;
    int64_t wall_ms;
    const char *error;
} hredis_result_t;

/** Write each result's state (JSON in redins' fields, EX ttl_s) and drop its lock. 0 or -1. */
int hredis_publish(hredis_t *h, const hredis_result_t *res, unsigned n, unsigned ttl_s);

/** Load shedding's Redis source: for each endpoint of eps (n, load_src HEALTH_LOAD_REDIS; their
 * spec strings and addresses read without the registry's lock: they never change), HGET
 * <load_key> <address as text> — the operator's hash, without the state keys' prefix and
 * suffix — pipelined in one round trip. out[i] is the load (health_load.h) or
 * HEALTH_LOAD_UNKNOWN (no such field, not a number). 0, or -1 when Redis failed (out[] unset). */
int hredis_loads(hredis_t *h, struct ep *const *eps, unsigned n, uint32_t *out);

/** RFC 3339 UTC time with nanoseconds, as Go's time.Time marshals ("2026-11-25T10:00:00.5Z"
 * style, always 9 digits here); buf of at least 40 bytes. */
void hredis_format_time(int64_t wall_ms, char *buf, size_t len);

/** Parse an RFC 3339 time (fraction optional, Z or +hh:mm) into wall clock ms; false when it is
 * not one. */
bool hredis_parse_time(const char *s, int64_t *wall_ms);

#endif
