/*
 * health.h — health-checked endpoints: what a check is (health_spec_t), the registry that gives
 * every distinct check one endpoint, and the one byte per endpoint the workers read.
 *
 * Owns: the endpoints (health_ep_t) and their state, and the administrative overrides
 * (`ternctl health set`). The checks themselves run on the checker thread (health_check.h),
 * which writes results here; zones hold references to endpoints; workers read ranks.
 *
 * Lifecycle: the loader creates one registry for the process. Zone builders intern an endpoint
 * for every checked A/AAAA record (health_intern(): the same spec gives the same endpoint, so
 * one endpoint shared by many RRsets, zones and zone versions is checked once) and every zone
 * holds one reference per endpoint it uses, dropped by zone_free() after the RCU grace period.
 * An endpoint lives while a zone (or a check in flight) references it; its state survives
 * reloads that keep it (the new zone version interns the same spec before the old one goes).
 * Overrides are kept by address (and port) apart from endpoints, so they survive reloads and
 * apply to endpoints that appear later.
 *
 * Semantics (redins' handler/healthcheck.go, made explicit): each endpoint has a counter
 * `status` from down_count (negative) to up_count. A success moves it up by one, or to +1 from
 * zero or below; a failure moves it down by one, or to -1 from above zero (statusUp/statusDown).
 * A new endpoint starts at 0 ("unknown"). Its rank orders endpoints for selection:
 *   HEALTH_RANK_DOWN (0)     status <= down_count, or forced down;
 *   HEALTH_RANK_MIDDLE (1)   between (unknown, failing, early recovery);
 *   HEALTH_RANK_NEAR (2)     status == up_count - 1;
 *   HEALTH_RANK_UP (3)       status >= up_count, forced up, or a record with no check.
 * An RRset keeps the records of the highest rank present: that is redins' FilterHealthcheck
 * (keep the healthiest; all fully down → all, "fail open") in one pass over the records.
 *
 * Threading: the registry's structure, reference counts and every field but the rank are
 * protected by its mutex (loader, Redis source, checker and control threads). The rank is one
 * byte written with an atomic store by whoever changes status or override, under that mutex,
 * and read by workers with a relaxed atomic load: no lock and no allocation on the query path.
 * The load cell (load shedding: health_ep_load()) is the same: 32 bits stored atomically by the
 * checker thread (a check's reading, a Redis poll, or "unknown" once stale), read relaxed.
 */
#ifndef TERN_HEALTH_HEALTH_H
#define TERN_HEALTH_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/common/compiler.h"

typedef enum {
    HEALTH_HTTP = 0,
    HEALTH_HTTPS,
    HEALTH_TCP,  /* connect() succeeds: tern's, not redins' */
    HEALTH_ICMP, /* echo request answered (redins' "ping" or "icmp") */
    HEALTH_PROTO_COUNT
} health_proto_t;

typedef enum { HEALTH_HEAD = 0, HEALTH_GET } health_method_t;

enum { HEALTH_RANK_DOWN = 0, HEALTH_RANK_MIDDLE, HEALTH_RANK_NEAR, HEALTH_RANK_UP };

typedef enum { HEALTH_AUTO = 0, HEALTH_FORCE_UP, HEALTH_FORCE_DOWN } health_override_t;

/* Status codes a check may accept; a list longer than this is a config error. */
#define HEALTH_MAX_EXPECT 8
/* The longest uri: a health URL is a path and a short query, never a document. */
#define HEALTH_URI_MAX 1024
/* Counter bounds: redins lets any int through; a thousand checks in a row is already hours. */
#define HEALTH_COUNT_MAX 1000
/* A check that waits longer than a minute tells nothing a shorter one would not. */
#define HEALTH_TIMEOUT_MAX_MS 60000

/* redins' defaults for what a health_check object leaves out (handler/healthcheck.go
 * Transfer()), except the port: redins ignored it; tern checks 80 for http, 443 for https. */
#define HEALTH_DEFAULT_TIMEOUT_MS 1000
#define HEALTH_DEFAULT_UP         3
#define HEALTH_DEFAULT_DOWN       (-3)

/* Load shedding (issue 33; answer/steer_shed.c): where a check's response carries the
 * endpoint's load. Part of the spec, so two RRsets that check the same address but read their
 * load from different places get two endpoints (two checks), each with its own load cell. */
typedef enum {
    HEALTH_LOAD_NONE = 0,
    HEALTH_LOAD_HEADER, /* a number in response header load_key (http, https) */
    HEALTH_LOAD_JSON,   /* a number at dotted path load_key in the JSON body (GET) */
    HEALTH_LOAD_REDIS,  /* HGET load_key <address>, polled by the checker over its Redis */
} health_load_src_t;
/* The load cell's "no reading": missing, unparsable or stale (older than
 * HEALTH_LOAD_STALE_CHECKS check intervals). Loads are milli-units (0.85 -> 850, 90 -> 90000). */
#define HEALTH_LOAD_UNKNOWN UINT32_MAX
/* A reading older than this many check intervals is unknown: one or two checks lost to a
 * timeout keep the last reading; a signal that stopped coming does not steer for long. */
#define HEALTH_LOAD_STALE_CHECKS 3
/* A header name or JSON path: header names are short tokens, paths a few keys deep. */
#define HEALTH_LOAD_KEY_MAX 128

/* What is checked and how. The strings are borrowed by health_intern(), which copies them. */
typedef struct health_spec {
    uint8_t proto;   /* health_proto_t */
    uint8_t family;  /* 4 or 6 */
    uint8_t method;  /* http(s): health_method_t */
    bool tls_verify; /* https: verify the certificate against host (default true) */
    uint8_t nexpect; /* http(s): codes in expect; 0 = 200, 301 and 302 (redins') */
    uint16_t port;   /* http, https, tcp: 1..65535; icmp: 0 */
    uint16_t expect[HEALTH_MAX_EXPECT];
    int16_t up_count;    /* 1..HEALTH_COUNT_MAX */
    int16_t down_count;  /* -HEALTH_COUNT_MAX..-1 */
    uint32_t timeout_ms; /* 1..HEALTH_TIMEOUT_MAX_MS */
    uint8_t addr[16];    /* 4 or 16 bytes by family */
    const char *uri;     /* http(s): starts with '/'; NULL = "/" */
    /* The owner the check is for: the Host header and TLS name of http(s), and the name in the
     * endpoint's Redis key (redins:healthcheck:<host>.:<ip>). Lowercase, no final dot; NULL for
     * a check shared by owners (tcp/icmp given by address in ternd.yaml). */
    const char *host;
    uint8_t load_src;     /* health_load_src_t */
    const char *load_key; /* the header name or JSON path; NULL without a load source */
} health_spec_t;

/* The part of an endpoint the query path sees: zone_geo_rr_t.health points at it. */
typedef struct health_ep {
    uint8_t rank; /* HEALTH_RANK_*: read with health_ep_rank() only */
    /* The last load reading in milli-units, or HEALTH_LOAD_UNKNOWN (also without a load
     * source): written by the checker with an atomic store, read with health_ep_load() only. */
    uint32_t load;
} health_ep_t;

/** The endpoint's rank, as the worker selecting a record sees it now. NULL (a record with no
 * check) is HEALTH_RANK_UP. Lock-free, allocation-free. */
static inline unsigned health_ep_rank(const health_ep_t *ep)
{
    return ep ? __atomic_load_n(&ep->rank, __ATOMIC_RELAXED) : HEALTH_RANK_UP;
}

/** The endpoint's load as the worker selecting a record sees it now (milli-units), or
 * HEALTH_LOAD_UNKNOWN: no source, no reading yet, or stale. NULL is unknown. Lock-free. */
static inline uint32_t health_ep_load(const health_ep_t *ep)
{
    return ep ? __atomic_load_n(&ep->load, __ATOMIC_RELAXED) : HEALTH_LOAD_UNKNOWN;
}

/** "http", "https", "tcp", "icmp". */
const char *health_proto_name(unsigned proto);

/** The protocol named by s (len bytes): http, https, tcp, and redins' ping or icmp (both
 * HEALTH_ICMP). -1 when unknown. */
int health_proto_parse(const char *s, size_t len);

/** redins' defaults: http HEAD of "/" on port 80 (443 once proto is set to https by
 * health_spec_default_port()), 1000 ms, up 3, down -3, 200/301/302, TLS verified. */
void health_spec_init(health_spec_t *s);

/** The port a spec without one uses: 80 http, 443 https, 0 icmp; tcp has none (0). */
uint16_t health_spec_default_port(unsigned proto);

/**
 * Check a filled spec: port 1..65535 (0 for icmp), timeout 1..HEALTH_TIMEOUT_MAX_MS, up_count
 * 1..HEALTH_COUNT_MAX, down_count -HEALTH_COUNT_MAX..-1, uri "/..." without spaces or control
 * characters, expected codes 100..599. Returns 0, or TERN_EINVAL with the reason in err
 * ("port 0 is not a port"; the caller adds where).
 */
int health_spec_check(const health_spec_t *s, char *err, size_t errlen) TERN_WUR;

typedef struct health_registry health_registry_t;

/** An empty registry. NULL when out of memory. */
health_registry_t *health_registry_new(void) TERN_WUR;

/** Free the registry. Every endpoint must have been released (leftovers are logged and freed). */
void health_registry_free(health_registry_t *r);

/**
 * The endpoint of spec (checked with health_spec_check() by the caller), created at rank
 * "unknown" if no endpoint has exactly this spec; one more reference either way. A new endpoint
 * is due for its first check at once and gets any override set for its address. NULL when out
 * of memory. Any thread.
 */
health_ep_t *health_intern(health_registry_t *r, const health_spec_t *spec) TERN_WUR;

/** One more reference to ep. Any thread. */
void health_ep_retain(health_ep_t *ep);

/** Drop one reference; the last one frees the endpoint. NULL is a no-op. Any thread. */
void health_ep_release(health_ep_t *ep);

/**
 * Force every endpoint at addr (family 4 or 6) — and port, unless port is 0 — up or down, or
 * give it back to its checks (HEALTH_AUTO). The override is kept for endpoints of that address
 * that appear later, across reloads, until set to auto. Returns how many current endpoints it
 * matched (0 is fine: it waits for them), or TERN_ENOMEM.
 */
int health_set_override(health_registry_t *r, int family, const uint8_t *addr, uint16_t port,
                        health_override_t state) TERN_WUR;

/* One endpoint as ternctl and /metrics report it (strings valid during the callback only). */
typedef struct health_ep_info {
    const health_spec_t *spec;
    const health_ep_t *ep; /* what zone_geo_rr_t.health points at (`ternctl explain`) */
    unsigned rank;
    int status;          /* the counter */
    const char *state;   /* "up", "down", "unknown", "failing", "recovering" */
    unsigned override;   /* health_override_t */
    bool checked;        /* a result is known (own check, or read from Redis) */
    bool last_ok;        /* of the last result */
    bool last_remote;    /* the last result was another node's, read from Redis */
    int64_t last_check;  /* wall clock ms of the last result; 0 = none */
    uint32_t latency_us; /* of the last own check */
    uint64_t checks;     /* own checks completed */
    uint64_t failures;   /* of those, failed */
    const char *error;   /* why the last check failed; "" when it did not */
    uint32_t refs;
} health_ep_info_t;

typedef void (*health_each_fn)(void *ctx, const health_ep_info_t *info);

/** Call fn for every endpoint, under the registry's mutex (keep fn short: no I/O that can
 * block). Returns how many. Any thread. */
size_t health_each(health_registry_t *r, health_each_fn fn, void *ctx);

/** Text form of an endpoint for logs and ternctl: "192.0.2.1:80 http www.example.test". */
void health_spec_describe(const health_spec_t *s, char *buf, size_t len);

#endif
