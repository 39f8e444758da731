/*
 * snapshot.h — private to src/load: what the loader publishes (a view and what it was built
 * from) and how the next build finds what it can share of it.
 *
 * A snapshot is made by view_build() on the loader thread, published (its view is what workers
 * read), and freed by snapshot_free() once a newer one is published and the grace period is
 * over. Zones are shared between consecutive snapshots by reference; each zone entry remembers
 * every file it was read from (struct dep) so the next reload reads only what changed.
 *
 * Threading: the loader thread only (loader_zones() reads the current one under the loader's
 * lock).
 */
#ifndef TERN_LOAD_SNAPSHOT_H
#define TERN_LOAD_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "tern/answer/answer.h"
#include "tern/conf/config.h"
#include "tern/geo/asn_table.h"
#include "tern/geo/geoip.h"
#include "tern/geo/latency_map.h"
#include "tern/source/zone_source.h"
#include "tern/zone/aname_results.h"
#include "tern/zone/zone_table.h"

/* One file a zone was read from, as it was when read; or one whose absence it depends on (a
 * master file's journal that does not exist: absent, unchanged while it still does not). */
struct dep {
    char *path;
    bool absent;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtim, ctim;
};

/* One configured zone of a snapshot. */
struct zent {
    char *key;  /* zone_source_key(): what "the same zone" means */
    char *file; /* the path as configured; for a Redis zone, where it came from */
    config_zone_format_t format;
    zone_source_t *src; /* the source that added it (Redis), NULL: a configured zone */
    zone_t *zone;
    int64_t loaded;   /* wall clock when this version of the zone was read */
    bool fresh;       /* read by the reload that built this snapshot (not shared) */
    uint64_t version; /* loader-wide counter of zone reads: equal means the very same data */
    struct dep *deps;
    size_t ndeps, capdeps;
    char *signing; /* zone_sign_ident(): the keys and policy it was signed with; "" = unsigned */
};

/* A mapped ASN table, shared by consecutive snapshots while its file does not change. */
struct asn_ref {
    asn_table_t *t;
    uint32_t refs; /* loader thread only */
    struct dep dep;
};

/* A mapped MaxMind DB, shared the same way. */
struct geo_ref {
    geoip_db_t *db;
    uint32_t refs; /* loader thread only */
    struct dep dep;
};

/* The latency map (tern/geo/latency_map.h), shared the same way while its source is unchanged:
 * the file (dep) or the Redis key's value (key and hash). view_latency.c. */
struct latency_ref {
    latency_map_t *m;
    uint32_t refs;  /* loader thread only */
    struct dep dep; /* the file; dep.path NULL for a Redis key */
    char *key;      /* the Redis key, or NULL */
    uint64_t hash;  /* tern_hash64() of the key's value */
};

/* What is published: the view first, so the workers' pointer is the snapshot's address. */
struct snapshot {
    answer_view_t view;
    zone_table_t *table;
    char *identity, *version;
    struct asn_ref *asn;             /* NULL when no asn_table is configured */
    struct geo_ref *geo_v4, *geo_v6; /* geoip_db, geoip_db_v6; NULL when not configured */
    struct latency_ref *latency;     /* latency_map; NULL when not configured */
    limit_t *limit;                  /* the view's ACLs, rate limits, RRL, cookies; or NULL */
    aname_results_t *aname;          /* the view's ANAME results (a reference), or NULL */
    struct zent *z;
    size_t nz;
    size_t records;
    size_t bytes; /* zone data (arena footprints), shared zones included */
};

/** Free s and its entries (their zones belong to its table). NULL is a no-op. */
void snapshot_free(struct snapshot *s);

/** Free what entry e holds but its zone (the table's). */
void snapshot_zent_clear(struct zent *e);

/** Forget the files a zone read was told of (a patch attempt that turned into a full read). */
void snapshot_deps_clear(struct zent *e);

/** d's identity and times from st. */
void snapshot_dep_set(struct dep *d, const struct stat *st);

/** zone_file_seen_fn (ctx: a struct zent): remember path as one of the zone's files, as st
 * says it is (NULL: it does not exist, and the zone depends on that). A path seen again is
 * updated, not added twice. */
int snapshot_dep_add(void *ctx, const char *path, const struct stat *st);

/** True when d's file is still the one remembered (identity, size and times). */
bool snapshot_dep_unchanged(const struct dep *d);

/** dst remembers src's files too. 0 or TERN_ENOMEM. */
int snapshot_deps_copy(struct zent *dst, const struct zent *src);

/* A snapshot's entries by key: built once per reload, so matching 10,000 zones is linear, not
 * quadratic. Open addressing over indices into old->z. */
typedef struct snapshot_index {
    const struct snapshot *old;
    uint32_t *slot; /* index + 1; 0 = empty */
    size_t mask;
} snapshot_index_t;

/** Index old's entries (old may be NULL: an empty index). 0 or TERN_ENOMEM; free(ix->slot). */
int snapshot_index_init(snapshot_index_t *ix, const struct snapshot *old);

/** The entry of ix's snapshot for key (keys are unique in a snapshot), or NULL. */
const struct zent *snapshot_find(const snapshot_index_t *ix, const char *key);

/** The old entry for the same origin, file, format and signing whose files are all unchanged
 * (quick: not looked at), or NULL. */
const struct zent *snapshot_reusable(const snapshot_index_t *ix, const char *key, const char *file,
                                     config_zone_format_t format, const char *signing, bool quick);

/** The old entry a changed master file of e may be read as a patch of, or NULL. */
const struct zent *snapshot_patch_base(const snapshot_index_t *ix, const struct zent *e,
                                       const config_zone_t *cz, bool health_changed);

/** Log what a reload changed, zone by zone: added, reloaded (serials), removed. */
void snapshot_log_changes(const struct snapshot *old, const struct snapshot *s);

#endif
