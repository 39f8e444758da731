/*
 * source_file.c — see source_file.h. A master file is read with its journal of dynamic changes
 * replayed over it (source_journal.h). The source remembers, per zone, the files its last full
 * read saw and the version it made: when a build asks again (the journal grew: an UPDATE was
 * appended, zone_sink_t.reread) and none of those files changed, only the journal's new entries
 * are applied to the version served — the cost of the change, not of the zone.
 */
#include "tern/source/source_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/log.h"
#include "tern/source/source_journal.h"

/* One file a read saw, as it was. */
typedef struct fdep {
    char *path;
    bool absent;
    struct stat st;
} fdep_t;

/* What the last full read of a zone saw, and the version the source made last. */
typedef struct fzone {
    char *key;
    fdep_t *deps;
    size_t ndeps, capdeps;
    const zone_t *made; /* identity only (never dereferenced): the version read() gave last */
    uint32_t serial;
} fzone_t;

typedef struct source_file {
    zone_source_t base;
    fzone_t *z;
    size_t nz, capz;
} source_file_t;

static void deps_free(fdep_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(d[i].path);
    free(d);
}

static fzone_t *fzone_get(source_file_t *f, const char *key)
{
    for (size_t i = 0; i < f->nz; i++)
        if (strcmp(f->z[i].key, key) == 0)
            return &f->z[i];
    if (tern_grow((void **)&f->z, &f->capz, f->nz + 1, sizeof(*f->z)) < 0)
        return NULL;
    fzone_t *z = &f->z[f->nz];
    memset(z, 0, sizeof(*z));
    if (!(z->key = strdup(key)))
        return NULL;
    f->nz++;
    return z;
}

static bool same_stat(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Whether every file of z's last full read is as it was, its journal (jpath) aside. */
static bool deps_unchanged(const fzone_t *z, const char *jpath)
{
    for (size_t i = 0; i < z->ndeps; i++) {
        if (strcmp(z->deps[i].path, jpath) == 0)
            continue;
        struct stat st;
        bool there = stat(z->deps[i].path, &st) == 0;
        if (there == z->deps[i].absent || (there && !same_stat(&st, &z->deps[i].st)))
            return false;
    }
    return z->ndeps > 0;
}

/* A full read's files: recorded, and told to the loader (rd->seen). */
typedef struct recorder {
    const zone_source_read_t *rd;
    fdep_t *deps;
    size_t n, cap;
    bool nomem;
} recorder_t;

static int record(void *ctx, const char *path, const struct stat *st)
{
    recorder_t *r = ctx;
    if (tern_grow((void **)&r->deps, &r->cap, r->n + 1, sizeof(*r->deps)) < 0 ||
        !(r->deps[r->n].path = strdup(path))) {
        r->nomem = true;
    } else {
        r->deps[r->n].absent = !st;
        if (st)
            r->deps[r->n].st = *st;
        r->n++;
    }
    return r->rd->seen ? r->rd->seen(r->rd->seen_ctx, path, st) : 0;
}

/* The journal at jpath: seen (it exists or not) through seen(). */
static int see_journal(int (*seen)(void *, const char *, const struct stat *), void *ctx,
                       const char *jpath)
{
    struct stat st;
    if (stat(jpath, &st) == 0)
        return seen(ctx, jpath, &st);
    return errno == ENOENT ? seen(ctx, jpath, NULL) : 0;
}

/* The journal's entries after v's serial over v: 0 with *out the new version or NULL (none).
 * dnskeys (a zone tern signs; v was read without them): the new version is built whole with
 * them, since a signed zone is signed per build and never patched. */
static int replay(const zone_source_read_t *rd, const char *jpath, const zone_t *v, bool quiet,
                  const uint8_t *dnskeys, zone_t **out, char *err, size_t errlen)
{
    const config_zone_t *cz = rd->cz;
    size_t applied = 0;
    *out = NULL;
    int rc = dnskeys ? source_journal_apply_whole(jpath, v, cz->file, dnskeys, rd->dnskeys_len, out,
                                                  &applied, err, errlen)
                     : source_journal_apply(jpath, v, cz->file, out, &applied, err, errlen);
    if (rc == 0 && *out) /* quiet: an UPDATE just applied, which the update service logged */
        log_msg(quiet ? LOG_LVL_DEBUG : LOG_LVL_INFO,
                "zone %s: %zu changes from %s replayed (serial %u to %u)", cz->origin, applied,
                jpath, v->serial, (*out)->serial);
    return rc;
}

/* Only the journal may have changed since z's version: its new entries over rd->base. */
static int read_journal(fzone_t *z, const zone_source_read_t *rd, const char *jpath, zone_t **out,
                        char *err, size_t errlen)
{
    int rc = 0;
    for (size_t i = 0; i < z->ndeps && rc == 0 && rd->seen; i++)
        if (strcmp(z->deps[i].path, jpath) != 0)
            rc = rd->seen(rd->seen_ctx, z->deps[i].path, z->deps[i].absent ? NULL : &z->deps[i].st);
    if (rc == 0 && rd->seen)
        rc = see_journal(rd->seen, rd->seen_ctx, jpath);
    if (rc < 0) {
        snprintf(err, errlen, "out of memory");
        return rc;
    }
    zone_t *n = NULL;
    if ((rc = replay(rd, jpath, rd->base, true, NULL, &n, err, errlen)) < 0)
        return rc;
    if (!n)
        return ZONE_FILE_SAME;
    z->made = n;
    z->serial = n->serial;
    *out = n;
    return 0;
}

/* The file read (patched from rd->base, or whole), then its journal over it. */
static int read_full(fzone_t *z, const zone_source_read_t *rd, const char *jpath, zone_t **out,
                     char *err, size_t errlen)
{
    const config_zone_t *cz = rd->cz;
    recorder_t r = {.rd = rd};
    /* a zone tern signs with changes in its journal: the file read unsigned, then built whole
     * with the journal and the signer's DNSKEYs (replay()) */
    source_journal_info_t ji = {0};
    char jerr[256];
    bool whole =
        rd->dnskeys && source_journal_info(jpath, &ji, jerr, sizeof(jerr)) == 0 && ji.entries > 0;
    const zone_file_opts_t fo = {.seen = record,
                                 .seen_ctx = &r,
                                 .health = rd->health_fn,
                                 .health_ctx = rd->health_ctx,
                                 .dnskeys = whole ? NULL : rd->dnskeys,
                                 .dnskeys_len = whole ? 0 : rd->dnskeys_len};
    zone_t *v = NULL;
    int rc;
    if (!rd->base) {
        rc = zone_file_load_opts(cz->origin, cz->file, &fo, &v, err, errlen);
    } else {
        char why[512];
        rc = zone_file_patch(cz->origin, cz->file, &fo, rd->base, &v, why, sizeof(why));
        if (rc < 0)
            snprintf(err, errlen, "%s", why);
        else if (rc == 0)
            log_info("zone %s: %s: %zu names changed, patched (%u patches since its last full "
                     "read)",
                     cz->origin, cz->file, v->patched - rd->base->patched, v->patches);
        else if (rc == ZONE_FILE_BUILD)
            log_info("zone %s: %s: reading it in full (%s)", cz->origin, cz->file, why);
    }
    if (rc == 0 || rc == ZONE_FILE_SAME) {
        zone_t *j = NULL;
        int jr = see_journal(record, &r, jpath);
        if (jr == 0)
            jr = replay(rd, jpath, v ? v : rd->base, false, whole ? rd->dnskeys : NULL, &j, err,
                        errlen);
        if (jr == 0 && whole && !j) { /* nothing to replay after all: the file read signed */
            zone_free(v);
            v = NULL;
            zone_file_opts_t fs = fo;
            fs.dnskeys = rd->dnskeys;
            fs.dnskeys_len = rd->dnskeys_len;
            jr = zone_file_load_opts(cz->origin, cz->file, &fs, &j, err, errlen);
        }
        if (jr < 0) {
            zone_free(v);
            rc = jr;
        } else if (j) {
            zone_free(v);
            v = j;
            rc = 0;
        }
    }
    if (r.nomem && rc >= 0) {
        zone_free(v);
        snprintf(err, errlen, "out of memory");
        rc = TERN_ENOMEM;
    }
    if (rc >= 0 && rc != ZONE_FILE_BUILD) {
        deps_free(z->deps, z->ndeps);
        z->deps = r.deps;
        z->ndeps = r.n;
        z->capdeps = r.cap;
        r.deps = NULL;
        r.n = 0;
        z->made = rc == 0 ? v : rd->base;
        z->serial = z->made->serial;
        if (rc == 0)
            *out = v;
    }
    deps_free(r.deps, r.n);
    return rc;
}

static int read_zone(zone_source_t *s, const zone_source_read_t *rd, zone_t **out, char *err,
                     size_t errlen)
{
    source_file_t *f = (source_file_t *)s;
    const config_zone_t *cz = rd->cz;
    char *key = zone_source_key(cz->origin), *jpath = source_journal_path(cz->file);
    fzone_t *z = key ? fzone_get(f, key) : NULL;
    int rc;
    if (!z || !jpath) {
        snprintf(err, errlen, "out of memory");
        rc = TERN_ENOMEM;
    } else {
        source_journal_lock(); /* the file and its journal as one: no flush in between */
        if (rd->base && z->made == rd->base && z->serial == rd->base->serial &&
            deps_unchanged(z, jpath))
            rc = read_journal(z, rd, jpath, out, err, errlen);
        else
            rc = read_full(z, rd, jpath, out, err, errlen);
        source_journal_unlock();
    }
    free(key);
    free(jpath);
    return rc;
}

static bool owns(const config_zone_t *cz)
{
    return cz->file && cz->format == CONFIG_ZONE_RFC1035;
}

static zone_source_t *file_new(const zone_source_env_t *env)
{
    (void)env;
    source_file_t *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->base.ops = &source_file_ops;
    return &f->base;
}

/* Forget the zones cfg no longer has. */
static int file_configure(zone_source_t *s, const config_t *cfg, const config_t *prev,
                          bool geo_changed)
{
    (void)prev;
    (void)geo_changed;
    source_file_t *f = (source_file_t *)s;
    size_t k = 0;
    for (size_t i = 0; i < f->nz; i++) {
        bool kept = false;
        for (size_t j = 0; j < cfg->nzones && !kept; j++) {
            char *key = owns(&cfg->zones[j]) ? zone_source_key(cfg->zones[j].origin) : NULL;
            kept = key && strcmp(key, f->z[i].key) == 0;
            free(key);
        }
        if (kept) {
            f->z[k++] = f->z[i];
        } else {
            free(f->z[i].key);
            deps_free(f->z[i].deps, f->z[i].ndeps);
        }
    }
    f->nz = k;
    return 0;
}

static void file_free(zone_source_t *s)
{
    source_file_t *f = (source_file_t *)s;
    for (size_t i = 0; i < f->nz; i++) {
        free(f->z[i].key);
        deps_free(f->z[i].deps, f->z[i].ndeps);
    }
    free(f->z);
    free(f);
}

const zone_source_ops_t source_file_ops = {
    .name = "file",
    .what = "the zones",
    .previous = "data",
    .new = file_new,
    .configure = file_configure,
    .owns = owns,
    .read = read_zone,
    .free = file_free,
};
