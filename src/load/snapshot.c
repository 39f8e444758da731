/*
 * snapshot.c — see snapshot.h.
 */
#include "snapshot.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/hash.h"
#include "tern/common/log.h"
#include "tern/limit/limit.h"

#include "view_db.h"
#include "view_latency.h"

void snapshot_zent_clear(struct zent *e)
{
    for (size_t i = 0; i < e->ndeps; i++)
        free(e->deps[i].path);
    free(e->deps);
    free(e->key);
    free(e->file);
    free(e->signing);
    /* the zone reference belongs to the table */
}

/* Forget the files a zone read was told of (a patch attempt that turned into a full read). */
void snapshot_deps_clear(struct zent *e)
{
    for (size_t i = 0; i < e->ndeps; i++)
        free(e->deps[i].path);
    e->ndeps = 0;
}

void snapshot_free(struct snapshot *s)
{
    if (!s)
        return;
    zone_table_free(s->table);
    for (size_t i = 0; i < s->nz; i++)
        snapshot_zent_clear(&s->z[i]);
    free(s->z);
    free(s->identity);
    free(s->version);
    view_db_asn_put(s->asn);
    view_latency_put(s->latency);
    limit_free(s->limit);
    aname_results_release(s->aname);
    view_db_geo_put(s->geo_v4);
    view_db_geo_put(s->geo_v6);
    free(s);
}

void snapshot_dep_set(struct dep *d, const struct stat *st)
{
    d->dev = st->st_dev;
    d->ino = st->st_ino;
    d->size = st->st_size;
    d->mtim = st->st_mtim;
    d->ctim = st->st_ctim;
}

int snapshot_dep_add(void *ctx, const char *path, const struct stat *st)
{
    struct zent *e = ctx;
    for (size_t i = 0; i < e->ndeps; i++)
        if (strcmp(e->deps[i].path, path) == 0) { /* seen again: as it is now */
            e->deps[i].absent = !st;
            if (st)
                snapshot_dep_set(&e->deps[i], st);
            return 0;
        }
    if (tern_grow((void **)&e->deps, &e->capdeps, e->ndeps + 1, sizeof(*e->deps)) < 0)
        return TERN_ENOMEM;
    struct dep *d = &e->deps[e->ndeps];
    if (!(d->path = strdup(path)))
        return TERN_ENOMEM;
    d->absent = !st;
    if (st)
        snapshot_dep_set(d, st);
    e->ndeps++;
    return 0;
}

bool snapshot_dep_unchanged(const struct dep *d)
{
    struct stat st;
    if (stat(d->path, &st) < 0)
        return d->absent && errno == ENOENT;
    return !d->absent && st.st_dev == d->dev && st.st_ino == d->ino && st.st_size == d->size &&
           st.st_mtim.tv_sec == d->mtim.tv_sec && st.st_mtim.tv_nsec == d->mtim.tv_nsec &&
           st.st_ctim.tv_sec == d->ctim.tv_sec && st.st_ctim.tv_nsec == d->ctim.tv_nsec;
}

int snapshot_index_init(snapshot_index_t *ix, const struct snapshot *old)
{
    ix->old = old;
    ix->slot = NULL;
    ix->mask = 0;
    if (!old || old->nz == 0)
        return 0;
    size_t n = 4;
    while (n < old->nz * 2)
        n *= 2;
    if (!(ix->slot = calloc(n, sizeof(*ix->slot))))
        return TERN_ENOMEM;
    ix->mask = n - 1;
    for (size_t i = 0; i < old->nz; i++) {
        size_t j = tern_hash_str(old->z[i].key) & ix->mask;
        while (ix->slot[j])
            j = (j + 1) & ix->mask;
        ix->slot[j] = (uint32_t)i + 1;
    }
    return 0;
}

/* The entry of ix's snapshot for key (keys are unique in a snapshot), or NULL. */
const struct zent *snapshot_find(const snapshot_index_t *ix, const char *key)
{
    if (!ix->slot)
        return NULL;
    for (size_t j = tern_hash_str(key) & ix->mask; ix->slot[j]; j = (j + 1) & ix->mask)
        if (strcmp(ix->old->z[ix->slot[j] - 1].key, key) == 0)
            return &ix->old->z[ix->slot[j] - 1];
    return NULL;
}

/* The old entry for the same origin, file and format whose files are all unchanged, or NULL. */
const struct zent *snapshot_reusable(const snapshot_index_t *ix, const char *key, const char *file,
                                     config_zone_format_t format, const char *signing, bool quick)
{
    const struct zent *e = snapshot_find(ix, key);
    if (!e || e->src || strcmp(e->file, file) != 0 || e->format != format ||
        strcmp(e->signing ? e->signing : "", signing) != 0)
        return NULL;
    if (quick)
        return e;
    for (size_t d = 0; d < e->ndeps; d++)
        if (!snapshot_dep_unchanged(&e->deps[d]))
            return NULL;
    return e;
}

/* A changed master file is read as a change of the version served (zone_file_patch()): the
 * new version shares every node page, RRset and byte it does not change, so a reload holds
 * little more than one copy of the zone and takes the time of reading the file, not of building
 * it. Not for zones signed by tern (signatures are made per build), nor when health checks or
 * the geo databases changed (every record is looked at again). The old entry, or NULL. */
const struct zent *snapshot_patch_base(const snapshot_index_t *ix, const struct zent *e,
                                       const config_zone_t *cz, bool health_changed)
{
    const struct zent *old = snapshot_find(ix, e->key);
    if (!old || old->src || !old->zone || old->zone->dnssec || old->zone->unavailable ||
        health_changed || cz->format != CONFIG_ZONE_RFC1035 || old->format != cz->format ||
        cz->ndnssec_keys || (old->signing && old->signing[0]) || strcmp(old->file, e->file) != 0)
        return NULL;
    return old;
}

int snapshot_deps_copy(struct zent *dst, const struct zent *src)
{
    for (size_t j = 0; j < src->ndeps; j++) {
        const struct dep *d = &src->deps[j];
        struct stat st = {.st_dev = d->dev, .st_ino = d->ino, .st_size = d->size};
        st.st_mtim = d->mtim;
        st.st_ctim = d->ctim;
        if (snapshot_dep_add(dst, d->path, d->absent ? NULL : &st) < 0)
            return TERN_ENOMEM;
    }
    return 0;
}

/* At most this many per-zone lines per reload; a mass change is summarised. */
#define LOG_ZONES_MAX 20

/* Log what a reload changed, zone by zone: added, reloaded (serials), removed. */
void snapshot_log_changes(const struct snapshot *old, const struct snapshot *s)
{
    snapshot_index_t in_old, in_new;
    if (snapshot_index_init(&in_old, old) < 0 || snapshot_index_init(&in_new, s) < 0) {
        free(in_old.slot);
        return;
    }
    size_t lines = 0, more = 0;
    for (size_t i = 0; i < s->nz; i++) {
        const struct zent *e = &s->z[i];
        if (!e->fresh || e->src)
            continue;
        if (lines++ >= LOG_ZONES_MAX) {
            more++;
            continue;
        }
        const struct zent *p = snapshot_find(&in_old, e->key);
        if (!p)
            log_info("zone %s: added (serial %u)", e->key, e->zone->serial);
        else if (p->zone->serial == e->zone->serial)
            log_info("zone %s: reloaded, serial %u unchanged", e->key, e->zone->serial);
        else
            log_info("zone %s: reloaded, serial %u -> %u", e->key, p->zone->serial,
                     e->zone->serial);
    }
    for (size_t i = 0; old && i < old->nz; i++) {
        if (old->z[i].src || snapshot_find(&in_new, old->z[i].key))
            continue;
        if (lines++ >= LOG_ZONES_MAX) {
            more++;
            continue;
        }
        log_info("zone %s: removed", old->z[i].key);
    }
    if (more)
        log_info("... and %zu more zone changes", more);
    free(in_old.slot);
    free(in_new.slot);
}
