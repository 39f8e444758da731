/*
 * loader.h — builds answer views from the zone sources and publishes them through RCU.
 *
 * One loader per process. It owns the recipe, one path for every trigger: changes in → build
 * (patch what changed, share the unchanged zones with the current table) → validate → sign →
 * publish the new view with tern_rcu_xchg() → tern_rcu_synchronize() → retire the old view in
 * one call. Workers only ever read the published pointer. The triggers: a reload (the
 * configuration read again through the caller's callback, so command-line overrides apply
 * again), the sources' changes (tern/source/zone_source.h: each source pushes whole zones,
 * patches or removals through the loader's sink; the loader does not know where a change came
 * from beyond its source's name), and the re-sign check of signatures made ahead.
 *
 * Threads: loader_load() runs on the calling thread (startup, before any worker exists). After
 * loader_start(), every trigger is served on the loader's own thread, in its own jemalloc arena;
 * loader_request() (any thread, e.g. the signal loop) asks for a reload, and requests that
 * arrive while a reload runs coalesce into exactly one more reload after it. The supervisor
 * (tern/load/supervisor.h) stops the loader thread, then the sources, then the health checker.
 *
 * A failed reload (a syntax error, a missing file, an invalid zone, an unreadable config) leaves
 * the current view published, logs the error with file and line, and is counted.
 *
 * Change detection: every file a zone was read from ($INCLUDEs too) is remembered with its
 * device, inode, size, mtime and ctime; a zone is re-read when any of them differs, when its
 * origin/file pair is new, or when a file is gone. An editor that saves in place, a rename over
 * the file and a touch are all seen. Unchanged zones cost one stat() per file.
 */
#ifndef TERN_LOAD_LOADER_H
#define TERN_LOAD_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/answer/answer.h"
#include "tern/common/compiler.h"
#include "tern/conf/config.h"
#include "tern/dnssec/dnssec_kasp.h"
#include "tern/health/health.h"
#include "tern/checker/health_check.h"
#include "tern/source/aname_resolver.h"
#include "tern/source/zone_source.h"

typedef struct loader loader_t;

/**
 * Fill cfg (uninitialised on entry) with the current configuration: config file plus command
 * line. Return 0, or a negative TERN_E* code with a message (file:line) in err; cfg is then
 * config_free()d by the loader.
 */
typedef int (*loader_config_fn)(void *ctx, config_t *cfg, char *err, size_t errlen);

typedef struct loader_stats {
    uint64_t reloads_ok;      /* reloads published (the initial load is not counted) */
    uint64_t reloads_failed;  /* reloads that kept the old view */
    int64_t last_duration_ms; /* of the last reload, successful or not; -1 before the first */
    int64_t last_time;        /* wall clock (s since the epoch) of the last reload; 0 before */
    bool last_ok;             /* result of the last reload */
    size_t zones;             /* in the published view */
    size_t records;           /* in the published view */
    char last_error[512];     /* the last failure's message, "" if none */
    /* The Redis source (redis_source.h), when configured */
    bool redis_enabled;
    bool redis_connected;
    size_t redis_zones;       /* in the Redis set at the last read */
    size_t redis_failed;      /* of those, rejected (the previous version, if any, serves) */
    uint64_t redis_publishes; /* views published for Redis changes alone */
    /* The bounds on untrusted Redis data (redis_source_stats_t has the details) */
    size_t redis_zones_skipped;        /* beyond max_zones at the last read, not served */
    uint64_t redis_labels_skipped;     /* labels skipped in builds (bad data, a bound) */
    uint64_t redis_over_value_bytes;   /* breaches of max_value_bytes, each counted once */
    uint64_t redis_over_labels;        /* of max_labels (zone versions rejected) */
    uint64_t redis_over_rrset_records; /* of max_rrset_records (labels skipped) */
} loader_stats_t;

/** A loader reading its configuration through fn. NULL when out of memory. */
loader_t *loader_new(loader_config_fn fn, void *ctx) TERN_WUR;

/**
 * The first read of the configuration, on the calling thread (as whoever started ternd: the
 * server binds its sockets from it before dropping privileges). 0, or a negative code after
 * logging the error. On success *cfg points at the config (owned by the loader, valid until
 * loader_free(): listen addresses, workers, TCP limits and the identity to switch to). A second
 * call returns the same config.
 */
int loader_read_config(loader_t *l, const config_t **cfg) TERN_WUR;

/**
 * The initial load of every zone and database of that config, on the calling thread, and the
 * first publish (and the Redis source's first read, bounded in time). Called after privileges
 * are dropped, so startup reads exactly what a reload can. 0, or a negative code after logging
 * the error.
 */
int loader_load_zones(loader_t *l) TERN_WUR;

/** loader_read_config() then loader_load_zones(): for callers with no privileges to drop. */
int loader_load(loader_t *l, const config_t **cfg) TERN_WUR;

/** Where the current view is published, for the workers (read with tern_rcu_deref()). */
const answer_view_t *const *loader_published(const loader_t *l);

/**
 * Called on the loader thread when a reload starts (done = false) and when it has finished
 * (done = true, stats filled). For service-manager notifications (sd_notify); keep it short.
 */
typedef void (*loader_listener_fn)(void *ctx, bool done, const loader_stats_t *stats);

struct xfr; /* tern/xfr/xfr.h */

/** The zone-transfer service (before loader_load_zones()): the loader gives it every config
 * and every changed zone, and serves the secondary zones it transfers. NULL: none. */
void loader_set_xfr(loader_t *l, struct xfr *x);

/** One more source, after the table's (tests; zone_source.c's table is how ternd gets its
 * sources): made with the loader's sink. Before loader_load_zones(). 0 or TERN_ENOMEM. */
int loader_add_source(loader_t *l, const zone_source_ops_t *ops) TERN_WUR;

/** The loader's source of that name (zone_source_ops_t.name: "xfr", "redis", "aname"), or
 * NULL: for wiring a source to what feeds it (source_primary_zone_in()). Valid until
 * loader_free(). Any thread. */
zone_source_t *loader_source(loader_t *l, const char *name);

/* A service that follows the config without being a zone source (the HTTP API): called on the
 * loader thread with each config that takes effect by a reload, after its view is published; the
 * callee copies what it keeps (cfg is the loader's). */
typedef void (*loader_config_hook_fn)(void *ctx, const config_t *cfg);

/**
 * `ternctl dnssec status [ZONE]`: the key state of a zone whose keys tern manages (dnssec:
 * {policy}; zone NULL: every such zone) — each key's role, tag, algorithm, state and next event,
 * the zone's next event and the DS it waits for — as a malloc'd text; NULL with err set. Any
 * thread.
 */
char *loader_dnssec_status(loader_t *l, const char *zone, char *err, size_t errlen);

/** `ternctl dnssec rollover ZONE ksk|zsk|csk`: start one now; the zone is built again at once.
 * 0, or a negative code with the reason in err. Any thread. */
int loader_dnssec_rollover(loader_t *l, const char *zone, const char *role, char *err,
                           size_t errlen) TERN_WUR;

/** `ternctl dnssec ds-seen ZONE [TAG]`: the parent has the DS of the KSK with that tag (-1:
 * every KSK whose DS is wanted); the zone is built again at once. 0, or a negative code with
 * the reason in err. Any thread. */
int loader_dnssec_ds_seen(loader_t *l, const char *zone, int tag, char *err,
                          size_t errlen) TERN_WUR;

/** `ternctl dnssec ds-gone ZONE`: the parent no longer has a DS for the zone being unsigned
 * (dnssec: {policy, unsign: true}); the zone is built again at once. 0, or a negative code with
 * the reason in err. Any thread. */
int loader_dnssec_ds_gone(loader_t *l, const char *zone, char *err, size_t errlen) TERN_WUR;

/* The roles of dnssec_kasp_role_t (KSK, ZSK, CSK), indexing loader_dnssec_keys_t.count. */
#define LOADER_DNSSEC_ROLES 3

/* One zone whose keys tern manages, as its last key step left it (GET /metrics). */
typedef struct loader_dnssec_keys {
    const char *zone; /* its key ("example.test"), inside the snapshot's block */
    /* keys by dnssec_kasp_role_t and dnssec_kasp_state_t, removed ones included (the history
     * its state keeps) */
    uint32_t count[LOADER_DNSSEC_ROLES][DNSSEC_KASP_STATE_COUNT];
    int64_t next_event; /* Unix seconds of its next key event; 0: none scheduled */
    bool ds_wanted;     /* a KSK/CSK is ready and its DS is awaited at the parent */
} loader_dnssec_keys_t;

/**
 * Every managed zone's key counts, next event and DS wait, as the loader thread left them at
 * each zone's last key step (a zone never stepped is left out): *out is one malloc'd block the
 * caller free()s (the zone names inside it), *n its entries, in no fixed order. 0, or
 * TERN_ENOMEM (*out NULL). Any thread: copied under the key registry's mutex, which is held
 * only for copies and steps, never for I/O of the caller's.
 */
int loader_dnssec_keys(loader_t *l, loader_dnssec_keys_t **out, size_t *n) TERN_WUR;

/** Set the config hook (before loader_start()); NULL: none. */
void loader_set_config_hook(loader_t *l, loader_config_hook_fn fn, void *ctx);

/** Set the listener (before loader_start()). */
void loader_set_listener(loader_t *l, loader_listener_fn fn, void *ctx);

/** Start the loader thread (after loader_load()). 0 or a negative code. */
int loader_start(loader_t *l) TERN_WUR;

/** Ask for a reload and return at once; coalesces with a pending one. Any thread. */
void loader_request(loader_t *l);

/**
 * Ask for a reload and wait until one that started after this call has finished. Returns true
 * if it published a new view (stats, if not NULL, is filled either way).
 */
bool loader_reload_wait(loader_t *l, loader_stats_t *stats);

/* One served zone, as ternctl and the metrics endpoint report it. */
typedef struct loader_zone_info {
    const char *origin; /* lowercased, without the final dot ("example.test"; "." for the root) */
    const char *file;   /* as configured */
    uint32_t serial;
    size_t records;
    size_t bytes;     /* memory of the zone's data */
    int64_t loaded;   /* wall clock (s since the epoch) when this version was read */
    uint64_t version; /* changes exactly when the zone is read again (a count of zone reads) */
    const struct dnssec_zone *dnssec; /* its signing state (tern/dnssec/dnssec_zone.h), or NULL:
                                         unsigned; valid only during the call */
} loader_zone_info_t;

typedef void (*loader_zone_fn)(void *ctx, const loader_zone_info_t *zone);

/**
 * Call fn for every zone of the published view, in configuration order, under the loader's lock
 * (a reload cannot publish meanwhile; keep fn short). The strings are valid only during the call.
 * Returns the number of zones. Any thread.
 */
size_t loader_zones(loader_t *l, loader_zone_fn fn, void *ctx);

/** A consistent copy of the counters. Any thread. */
void loader_get_stats(loader_t *l, loader_stats_t *out);

/** The ANAME resolver's counters (tern/source/aname_resolver.h); false (out zeroed) while no zone
 * has a target outside the served zones. Any thread. */
bool loader_aname_stats(loader_t *l, aname_stats_t *out);

/** A descriptor that polls readable once the ANAME resolver's first complete round is in the
 * published view (never read it; loader_free() closes it), or -1 when there is nothing to wait
 * for (no target outside the served zones, or no descriptor to be had). Any thread. */
int loader_aname_ready_fd(loader_t *l);

/** Log the ANAME targets still without an answer (aname_resolver_log_pending()). Any thread. */
void loader_aname_log_pending(loader_t *l);

/** The registry of every health-checked endpoint (tern/health/health.h): for listing them and
 * for administrative overrides. Valid until loader_free(). Any thread. */
health_registry_t *loader_health(loader_t *l);

/** The limit state shared by every view (tern/limit/limit.h), made by loader_read_config(): for
 * server_set_limits() (TCP connections per client). Valid until loader_free(). */
limit_shared_t *loader_limits(loader_t *l);

/** The checker's counters; false (zeros) when there is no checker (after loader_stop()). */
bool loader_health_stats(loader_t *l, health_checker_stats_t *out);

/**
 * Stop and join the loader thread (a reload in progress finishes first). Any thread but the
 * loader's own (not from a listener). NULL is a no-op.
 */
void loader_stop_thread(loader_t *l);

/** Stop every zone source's threads (tern/source/zone_source.h); after loader_stop_thread():
 * only the loader thread starts, restarts and stops them while it runs. NULL is a no-op. */
void loader_stop_sources(loader_t *l);

/** Stop the health checker; after loader_stop_sources(). NULL is a no-op. */
void loader_stop_health(loader_t *l);

/**
 * loader_stop_thread(), loader_stop_sources(), loader_stop_health(), in that order (the
 * supervisor calls them one by one, tern/load/supervisor.h). loader_free() calls it too.
 */
void loader_stop(loader_t *l);

/** Free the published view, the configs and the loader. Call after the workers have stopped. */
void loader_free(loader_t *l);

#endif
