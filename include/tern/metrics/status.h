/*
 * status.h — the status page beside /metrics: GET / (a self-contained HTML page) and GET
 * /status.json (what the page draws).
 *
 * Owns the health history (status_history_t): the endpoint's serving thread samples the health
 * registry about once a second and keeps, per endpoint, since when it is in its state and its
 * last few results — the registry itself keeps only the latest. Everything else is read at the
 * moment of the request from the same readers /metrics and ternctl use (server_stats(),
 * loader_zones(), loader_get_stats(), loader_health_stats(), health_each(), xfr_zone_info(),
 * loader_aname_stats()); nothing is computed twice.
 *
 * Lifecycle: status_history_new() with the endpoint (metrics_start()), freed by metrics_stop().
 * Threads: only the endpoint's serving thread touches a history (never a worker); the readers
 * take their owners' locks for as long as they copy and do no I/O.
 */
#ifndef TERN_METRICS_STATUS_H
#define TERN_METRICS_STATUS_H

#include <stdbool.h>
#include <stdint.h>

#include "tern/common/buf.h"
#include "tern/common/compiler.h"
#include "tern/health/health.h"
#include "tern/metrics/metrics_render.h"

/* Results kept per endpoint: what fits in a row of the page and shows a flap. */
#define STATUS_RECENT 10u
/* How often the serving thread samples the health registry: health checks run every few seconds
 * at the most, so a 1 s sample sees each result and dates a state change to within a second. */
#define STATUS_SAMPLE_MS 1000

typedef struct status_history status_history_t;

/* One result of an endpoint, as the history recorded it. */
typedef struct status_result {
    int64_t when; /* wall clock ms of the result (the registry's last_check) */
    bool ok;
    bool remote; /* another node's, read from Redis */
    uint32_t latency_us;
} status_result_t;

/* What the history knows of one endpoint. */
typedef struct status_ep_history {
    char state[16]; /* the registry's state name when last sampled */
    int64_t since;  /* wall clock ms of the sample that first saw that state */
    unsigned count; /* results in recent */
    status_result_t recent[STATUS_RECENT]; /* newest first */
} status_ep_history_t;

/** A new, empty history; NULL when out of memory. */
status_history_t *status_history_new(void) TERN_WUR;

/** Free h and what it holds. NULL is a no-op. */
void status_history_free(status_history_t *h);

/**
 * Record what the registry shows at now_ms (wall clock ms): a new result of an endpoint (its
 * last_check moved) goes into its recent results, a new state restarts its "since"; endpoints
 * gone from the registry are forgotten. r may be NULL (no health checks). Serving thread only.
 */
void status_history_sample(status_history_t *h, health_registry_t *r, int64_t now_ms);

/** Copy what h knows of the endpoint health_spec_describe() names key into *out: false when it
 * follows no such endpoint. */
bool status_history_get(const status_history_t *h, const char *key, status_ep_history_t *out);

/**
 * Render the status document into *out (initialised here): 0 with the NUL-terminated JSON in
 * out->p, or TERN_ENOMEM (*out freed). h may be NULL (no history: since and recent are absent).
 */
int status_json_render(tern_buf_t *out, const metrics_source_t *src,
                       const status_history_t *h) TERN_WUR;

/* The page: HTML with its script and style inline (no other request than /status.json). */
extern const char status_page_html[];

#endif
