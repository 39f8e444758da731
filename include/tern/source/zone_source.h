/*
 * zone_source.h — where zones come from: one interface, one file per source (src/source/).
 *
 * Owner: the loader (tern/load/loader.h) makes every source of zone_source.c's table when it is
 * made, configures each with every config it publishes, reads their zones into each build, and
 * frees them last. The supervisor (tern/load/supervisor.h) stops them (loader_stop_sources():
 * each one's stop() joins its threads) after the loader thread and before the loader's data goes.
 *
 * Changes come out of a source in one of two ways, into one recipe:
 * - Pushed: a source with a thread of its own (Redis, primary = AXFR/IXFR in, ANAME results)
 *   hands each change for zone K through the zone_sink_t it was made with — a whole new version,
 *   the changed names to patch into the version served, or K gone (later: a zone_delta). The sink
 *   queues it under the loader's lock and wakes the loader thread, which hands the batch back to
 *   the source's apply() on its own thread, then builds, validates, signs and publishes ONCE for
 *   everything that arrived. A change that is not a zone (new ANAME results) is a poke(): the
 *   loader calls collect().
 * - Served at build: the zones a source holds are read into every build — served() for the
 *   configured zones it owns (owns()), zones() for the ones it adds by itself (Redis).
 * Zone files and redins JSON files have no thread: the loader's build asks read() for a changed
 * file's new version (source_file.c, source_json.c).
 *
 * Lifecycle: zone_source_new() (the loader's) → configure (before the first build, then after
 *   each published reload) → start (once the loader thread runs) → apply/collect/served/zones
 *   (each build) → stop (joins: nothing is pushed after it returns) → free.
 * Threading: configure, start, apply, collect, served, zones, read and published run on the
 *   loader thread (or the main thread before the loader thread exists); push and poke are called
 *   from the source's own threads; stats and the source-specific readers named in its header
 *   from any thread.
 *
 * Adding a source touches: one file src/source/source_NAME.c (+ its header when the loader or
 * main needs more than this interface) defining `const zone_source_ops_t source_NAME_ops`; one
 * line in zone_source.c's table (its place there is its order in a build: a configured zone goes
 * to the first source that owns() it); its config block (tern/conf); its unit test
 * tests/unit/source/test_source_NAME.c. The loader, the supervisor and main are not edited.
 */
#ifndef TERN_SOURCE_ZONE_SOURCE_H
#define TERN_SOURCE_ZONE_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "tern/dnssec/dnssec_kasp_keys.h"
#include "tern/common/compiler.h"
#include "tern/conf/config.h"
#include "tern/health/health.h"
#include "tern/zone/zone.h"
#include "tern/zone/zone_builder.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_json.h"
#include "tern/zone/zone_table.h"

typedef struct zone_source zone_source_t;
typedef struct zone_source_ops zone_source_ops_t;

/* Every source begins with this (its first member), so the loader handles them alike. */
struct zone_source {
    const zone_source_ops_t *ops;
};

/* One change for zone `key`, as a source hands it to the sink. */
typedef struct zone_change {
    zone_source_t *src; /* who sent it: apply() gets it back */
    char *key;          /* zone_source_key() of the origin, malloc'd */
    zone_t *zone;       /* whole: the new version; patch: only the changed names; NULL: gone */
    uint8_t *names;     /* patch: nnames wire names back to back, malloc'd; NULL otherwise */
    size_t nnames;
} zone_change_t;

/* The loader's inbox, given to every source at zone_source_new(). */
typedef struct zone_sink {
    /** Any thread: queue c and wake the loader. 0: c's pointers belong to the loader now;
     * TERN_ENOMEM: they are still the caller's (it logs what it dropped). */
    int (*push)(void *ctx, const zone_change_t *c);
    /** Any thread: src holds new state for the view that is not a zone; the loader thread calls
     * its collect(). */
    void (*poke)(void *ctx, zone_source_t *src);
    /** Loader thread: forget what src queued (it stopped its thread and dropped its zones). */
    void (*drop)(void *ctx, zone_source_t *src);
    /** Any thread: configured zone key changed where its owner reads it though none of the
     * files the last build looked at says so yet (a dynamic change appended to a master file's
     * journal, tern/source/source_journal.h): the next build asks its owner's read() again, and
     * the loader thread is woken for one. 0 or TERN_ENOMEM. */
    int (*reread)(void *ctx, const char *key);
    void *ctx;
} zone_sink_t;

/* What a source may use of the loader's, fixed for its whole life. */
typedef struct zone_source_env {
    zone_sink_t sink;
    health_registry_t *health; /* every endpoint of every zone */
    /* Any thread: a record address's coordinates in the geo databases of the view served. */
    zone_json_locate_fn locate;
    void *locate_ctx;
    /* Loader thread: true when secondaries follow zone key (its transfer settings, tern/xfr) */
    bool (*followed)(void *ctx, const char *key);
    void *followed_ctx;
    /* Loader thread: true when the zone served as key is one a source added that is a copy of
     * another primary's (its ops' copies: a member of a catalog consumed), never offered as ours
     * (catalogs). Configured zones: their config says (primary:). NULL: none are. Its context is
     * followed_ctx. */
    bool (*secondary)(void *ctx, const char *key);
    /* Any thread: zone key (origin: its name in presentation form), whose keys a source drives,
     * waits for wants[0..n) at its parent's servers, asked every interval seconds (n 0: for
     * nothing, the job is dropped): the loader's DS checker (tern/load's ds_check) asks them,
     * and a DS seen goes back to the source (a ds-seen request). NULL: no checker. */
    void (*ds_want)(void *ctx, const char *key, const char *origin, const dnssec_kasp_ds_t *wants,
                    size_t n, char *const *parents, size_t nparents, unsigned interval);
    void *ds_want_ctx;
} zone_source_env_t;

/* One zone a threaded source serves: its latest version and when it arrived. */
typedef struct zone_source_zone {
    char *key;
    zone_t *zone;         /* the source's reference */
    uint64_t version;     /* zone_source_version() of its arrival: equal means the same data */
    int64_t loaded;       /* wall clock of its arrival */
    bool conflict_logged; /* the loader's: a clash with another zone was logged */
} zone_source_zone_t;

/* What the loader's build asks read() for: configured zone cz, read anew. */
typedef struct zone_source_read {
    const config_zone_t *cz;
    const zone_t *base; /* the version served, to patch (zone_file_patch()); NULL: read whole */
    /* each file read (the zone's dependencies, for change detection) */
    int (*seen)(void *ctx, const char *path, const struct stat *st);
    void *seen_ctx;
    /* zone_builder_health_fn and its context: the checks by address, or NULL */
    health_ep_t *(*health_fn)(void *ctx, const uint8_t *owner, uint16_t type, const uint8_t *addr);
    void *health_ctx;
    health_registry_t *health;  /* for the zone's own checks (JSON), NULL: health checking off */
    zone_json_locate_fn locate; /* JSON records located at load time, or NULL */
    void *locate_ctx;
    const uint8_t
        *dnskeys; /* a signed zone's apex records: DNSKEY, CDS, CDNSKEY (dnssec_setup.h), or NULL */
    size_t dnskeys_len;
} zone_source_read_t;

/* The counters every source has (a source's own header may offer more). */
typedef struct zone_source_stats {
    bool running;   /* configured on (its thread runs, for a source with one) */
    bool connected; /* reaches what it reads (always true for files) */
    size_t zones;   /* served */
    size_t failed;  /* rejected at the last read (the previous version, if any, serves) */
} zone_source_stats_t;

struct zone_source_ops {
    const char *name; /* "file", "json", "xfr" (primary), "redis", "aname": log prefix, lookup */
    /* When a view with its changes cannot be built: "<name>: cannot publish <what>: <why>;
     * still serving the previous <previous>" */
    const char *what, *previous;
    /* The zones it adds (zones()) are secondary copies of another primary's (catalog members):
     * never listed in a catalog of ours (zone_source_env_t.secondary). */
    bool copies;
    /** A source for the loader; NULL when out of memory. NULL: the source keeps nothing (no
     * state, no thread): a bare zone_source_t is made for it. */
    zone_source_t *(*new)(const zone_source_env_t *env);
    /** Follow cfg (prev: the config in force before, NULL at start; geo_changed: the databases
     * records are located with changed). Starts, restarts or stops its thread as cfg says. A
     * negative code fails only the startup (a reload logs and keeps going). Optional. */
    int (*configure)(zone_source_t *s, const config_t *cfg, const config_t *prev, bool geo_changed);
    /** The loader thread runs: threads that wait for it may start. Optional. */
    void (*start)(zone_source_t *s);
    /** Startup only, before the first publish of its zones: wait, bounded, for the first
     * complete read. True when it finished. Optional. */
    bool (*wait_first)(zone_source_t *s);
    /** Loader thread: the changes it pushed, in order; it takes their pointers. Returns how many
     * changed what it serves. Required for a source that pushes. */
    size_t (*apply)(zone_source_t *s, zone_change_t *c, size_t n);
    /** Loader thread, after a poke(): take the new state in. True when the view must be built
     * again. Optional. */
    bool (*collect)(zone_source_t *s);
    /** True when configured zone cz is this source's. Optional. */
    bool (*owns)(const config_zone_t *cz);
    /** Loader thread, each build: the entry of configured zone cz (key: its zone_source_key()),
     * made on first sight. NULL when out of memory. For owners that keep versions themselves. */
    const zone_source_zone_t *(*served)(zone_source_t *s, const char *key, const config_zone_t *cz);
    /** Loader thread, each build: read rd->cz anew. 0 with a new version in *out;
     * ZONE_FILE_SAME: rd->base holds the same data (*out untouched); ZONE_FILE_BUILD: a patch of
     * rd->base was not possible (logged), ask again without it; negative with a message in err.
     * For owners whose zones the loader reads (files). */
    int (*read)(zone_source_t *s, const zone_source_read_t *rd, zone_t **out, char *err,
                size_t errlen);
    /** Loader thread, each build: the zones it adds beyond the configured ones (n of them). */
    zone_source_zone_t *(*zones)(zone_source_t *s, size_t *n);
    /** Loader thread, after each publish: the table now served and the config in force (ANAME
     * targets). Optional. */
    void (*published)(zone_source_t *s, const zone_table_t *table, const config_t *cfg);
    /** Any thread: the common counters. Optional (zeros). */
    void (*stats)(zone_source_t *s, zone_source_stats_t *out);
    /** Stop its threads (joins; no push or poke after). Idempotent. Optional. */
    void (*stop)(zone_source_t *s);
    /** Free it and every zone it holds (after stop). NULL: made bare (new NULL). */
    void (*free)(zone_source_t *s);
};

/** The table of sources, in build order; *n of them. */
const zone_source_ops_t *const *zone_source_table(size_t *n);

/** A source of ops (ops->new(env), or a bare one); NULL when out of memory. */
zone_source_t *zone_source_new(const zone_source_ops_t *ops, const zone_source_env_t *env) TERN_WUR;

/** Free s (ops->free, or the bare one). NULL is a no-op. */
void zone_source_free(zone_source_t *s);

/** The source of src (n of them) named name, or NULL. */
zone_source_t *zone_source_find(zone_source_t *const *src, size_t n, const char *name);

/** The canonical key of a zone origin (dname_key(): escapes resolved, lowercased, no final dot,
 * "." for the root), malloc'd: the one meaning of "the same zone" for every source. NULL when out
 * of memory or the origin does not parse. */
char *zone_source_key(const char *origin) TERN_WUR;

/** A new zone version number (process-wide, from 1; any thread): a zone read's identity. */
uint64_t zone_source_version(void);

/** Free a change's key, zone and names (a change dropped). */
void zone_change_clear(zone_change_t *c);

#endif
