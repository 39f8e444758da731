/*
 * view_latency.h — private to src/load: the latency map a view answers geo_filter latency with
 * (tern/geo/latency_map.h), read from latency_map: (a file or a Redis key) and compiled here,
 * on the loader thread, at start and on every reload; shared by consecutive snapshots while its
 * source is unchanged (counted references, loader thread only).
 *
 * A map that does not read or compile fails the whole reload with "latency_map: <file>:<line>:
 * <what>" (or "redis key <KEY>:<line>: ..."): the old snapshot keeps answering with its map,
 * and at start it is a start-up error. The Redis key is read when a reload runs (SIGHUP, a
 * config reload), not polled: the operator who writes a new map says when it takes effect, and
 * the loader does no Redis round trip per zone change.
 */
#ifndef TERN_LOAD_VIEW_LATENCY_H
#define TERN_LOAD_VIEW_LATENCY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "tern/conf/config.h"

#include "snapshot.h"

/** The map cfg->latency_map names: prev again (a new reference) while its source is unchanged
 * (quick: a source publish, not looked at again), else read and compiled anew. A Redis read
 * gives up once *stop is true and stop_fd (the owner's eventfd) is written (both may be NULL
 * and -1). 0, or a negative code with the message in err. */
int view_latency_get(struct latency_ref *prev, const config_t *cfg, bool quick,
                     const atomic_bool *stop, int stop_fd, struct latency_ref **out, char *err,
                     size_t errlen);

/** Drop a reference. NULL is a no-op. */
void view_latency_put(struct latency_ref *r);

#endif
