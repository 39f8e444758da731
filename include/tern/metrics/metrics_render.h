/*
 * metrics_render.h — the Prometheus exposition (text format 0.0.4) that GET /metrics serves.
 *
 * Owns nothing between calls: each metrics_render() builds a fresh body from what its sources
 * report at that moment (metrics.h lists the families). It only reads — the workers' counters
 * summed by server_stats() without a lock, the loader's stats and zone list under the loader's
 * lock for as long as they take to copy, the health registry's and the transfer service's
 * counters — so it may run on any thread but a worker (it allocates: a buffer per call). The
 * endpoint's thread (metrics.c) calls it once per request.
 */
#ifndef TERN_METRICS_METRICS_RENDER_H
#define TERN_METRICS_METRICS_RENDER_H

#include <stdint.h>

#include "tern/common/buf.h"
#include "tern/common/compiler.h"
#include "tern/load/loader.h"
#include "tern/net/server.h"
#include "tern/xfr/xfr.h"

/* The largest body: 64 MiB is ~600,000 zones; past it something is wrong and a 500 is better
 * than any size. */
#define METRICS_BODY_MAX (64u * 1024 * 1024)

/** What the exposition reads. loader and server are required; xfr may be NULL (no tern_xfr_*
 * families). */
typedef struct metrics_source {
    loader_t *loader;
    const server_t *server;
    xfr_t *xfr;
    int64_t start_time; /* tern_start_time_seconds: wall clock, s since the epoch */
} metrics_source_t;

/**
 * Render every family into *out, which this initialises: 0 with the NUL-terminated body in
 * out->p (out->len bytes; the caller frees it with tern_buf_free() or hands it on), or
 * TERN_ENOMEM when memory ran out or the body would pass METRICS_BODY_MAX (*out is then freed).
 */
int metrics_render(tern_buf_t *out, const metrics_source_t *src) TERN_WUR;

#endif
