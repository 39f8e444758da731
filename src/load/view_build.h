/*
 * view_build.h — private to src/load: the build step of the loader's recipe, in named passes:
 * geo databases → configured zones (each from the source that owns it) → the zones the sources
 * add by themselves → the rest of the view (ASN table, limits, ANAME results), table frozen.
 *
 * A build shares every zone of the view served that did not change (a master file that did is
 * read as a patch of it), and fails whole: the view served stays. Loader thread only (or the
 * main thread at startup).
 */
#ifndef TERN_LOAD_VIEW_BUILD_H
#define TERN_LOAD_VIEW_BUILD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "tern/conf/config.h"
#include "tern/health/health.h"
#include "tern/limit/limit.h"
#include "tern/source/zone_source.h"

#include "snapshot.h"

/* What a build takes from the loader. */
typedef struct view_build_env {
    health_registry_t *health;    /* every endpoint */
    const config_t *cfg_in_force; /* of the view served (its checks are compared) */
    zone_source_t *const *src;    /* the sources, in zone_source_table() order */
    size_t nsrc;
    limit_shared_t *limits; /* shared by every view, or NULL */
    bool xfr;               /* a transfer service runs (view.cfg.xfr) */
    /* configured zones (keys) whose owners must read them again though their files are not
     * looked at (zone_sink_t.reread) */
    const char *const *stale;
    size_t nstale;
    struct zone_kasp *kasp; /* the zones whose keys tern manages (zone_kasp.h) */
    /* The owner's stop: a build's wait on a peer (the latency map's Redis GET) gives up within
     * milliseconds once *stop is true and stop_fd (an eventfd) has been written. NULL and -1:
     * the waits end at their own timeouts only. */
    const atomic_bool *stop;
    int stop_fd;
} view_build_env_t;

/**
 * A complete snapshot for cfg, sharing the unchanged zones of old (NULL: none); quick: the
 * sources' changes alone (files are not looked at again). 0 with *out and *changed (zones that
 * are not the very version old had), or a negative code with the message in err.
 */
int view_build(const view_build_env_t *env, const struct snapshot *old, const config_t *cfg,
               bool quick, struct snapshot **out, size_t *changed, char *err,
               size_t errlen) TERN_WUR;

#endif
