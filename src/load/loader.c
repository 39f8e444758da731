/*
 * loader.c — see loader.h. Snapshots, change detection, the reload thread.
 */
#include "tern/load/loader.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tern/common/arena.h"
#include "tern/common/clock.h"
#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/hash.h"
#include "tern/common/log.h"
#include "tern/common/mem.h"
#include "tern/common/rcu.h"
#include "tern/geo/asn_compile.h"
#include "tern/geo/asn_table.h"
#include "tern/geo/geoip.h"
#include "tern/health/health.h"
#include "tern/health/health_check.h"
#include "tern/xfr/journal.h"
#include "tern/xfr/xfr.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_json.h"
#include "tern/zone/aname_results.h"
#include "tern/zone/zone_table.h"
#include "tern/source/health_index.h"
#include "tern/source/source_aname.h"
#include "tern/source/source_redis.h"
#include "tern/source/zone_source.h"

#include "zone_sign.h"

/* One file a zone was read from, as it was when read. */
struct dep {
    char *path;
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

static void asn_ref_put(struct asn_ref *a)
{
    if (a && --a->refs == 0) {
        asn_table_close(a->t);
        free(a->dep.path);
        free(a);
    }
}

/* A mapped MaxMind DB, shared the same way. */
struct geo_ref {
    geoip_db_t *db;
    uint32_t refs; /* loader thread only */
    struct dep dep;
};

static void geo_ref_put(struct geo_ref *g)
{
    if (g && --g->refs == 0) {
        geoip_close(g->db);
        free(g->dep.path);
        free(g);
    }
}

/* What is published: the view first, so the workers' pointer is the snapshot's address. */
struct snapshot {
    answer_view_t view;
    zone_table_t *table;
    char *identity, *version;
    struct asn_ref *asn;             /* NULL when no asn_table is configured */
    struct geo_ref *geo_v4, *geo_v6; /* geoip_db, geoip_db_v6; NULL when not configured */
    limit_t *limit;                  /* the view's ACLs, rate limits, RRL, cookies; or NULL */
    aname_results_t *aname;          /* the view's ANAME results (a reference), or NULL */
    struct zent *z;
    size_t nz;
    size_t records;
    size_t bytes; /* zone data (arena footprints), shared zones included */
};

struct loader {
    loader_config_fn config_fn;
    void *config_ctx;
    const answer_view_t *published; /* RCU: written by tern_rcu_xchg, read by the workers */
    struct snapshot *cur;           /* == published, the writer's typed handle */
    config_t *cfg0;                 /* the startup config: listen, workers, TCP limits */
    unsigned arena;

    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* the loader thread waits here for requests */
    pthread_cond_t done; /* loader_reload_wait() waits here for a finished reload */
    uint64_t requested;  /* requests so far */
    uint64_t finished;   /* every request up to this one is covered by a finished reload */
    bool stop;
    uint64_t generation; /* reloads attempted */
    loader_listener_fn listener;
    void *listener_ctx;
    loader_stats_t stats;

    config_t *cfg_last; /* the config of the last published build (file zones, geo, sources) */

    /* The zone sources (tern/source/zone_source.h), in zone_source_table() order, each with
     * the views published for its changes alone. Their changes wait in chg (under mu) for the
     * loader thread; poked: a source holds new state that is not a zone (under mu). */
    zone_source_t **src;
    uint64_t *src_publishes;
    size_t nsrc;
    zone_change_t *chg;
    size_t nchg, capchg;
    bool *poked;
    bool *touched; /* take_changes()'s, loader thread */
    bool changes;  /* chg or poked holds something (under mu) */
    /* The geo databases the sources locate records with (their threads call src_locate()):
     * the current snapshot's, swapped under geo_mu when they change. */
    pthread_mutex_t geo_mu;
    struct geo_ref *sgeo_v4, *sgeo_v6;
    geoip_set_t sgeo;

    /* Health checks (tern/health/health.h): every zone's endpoints live in one registry; the
     * checker probes them once health checking is enabled. */
    health_registry_t *health;
    health_checker_t *checker;
    bool checker_started;

    /* Flood resistance (tern/limit/limit.h): the state shared by every view and worker (rate
     * tables, TCP counts, cookie secrets), made with the first config; each view has its own
     * immutable policy built from its config. */
    limit_shared_t *limits;

    /* Zone transfers (tern/xfr/xfr.h): the service main made, or NULL. The loader gives it
     * every config and every changed zone; secondary zones come from source_primary.c. */
    xfr_t *xfr;
};

/* The source named name, or NULL. */
static zone_source_t *source_named(const loader_t *l, const char *name)
{
    for (size_t i = 0; l && i < l->nsrc; i++)
        if (strcmp(l->src[i]->ops->name, name) == 0)
            return l->src[i];
    return NULL;
}

static void zent_clear(struct zent *e)
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
static void deps_clear(struct zent *e)
{
    for (size_t i = 0; i < e->ndeps; i++)
        free(e->deps[i].path);
    e->ndeps = 0;
}

static void snapshot_free(struct snapshot *s)
{
    if (!s)
        return;
    zone_table_free(s->table);
    for (size_t i = 0; i < s->nz; i++)
        zent_clear(&s->z[i]);
    free(s->z);
    free(s->identity);
    free(s->version);
    asn_ref_put(s->asn);
    limit_free(s->limit);
    aname_results_release(s->aname);
    geo_ref_put(s->geo_v4);
    geo_ref_put(s->geo_v6);
    free(s);
}

static void dep_set(struct dep *d, const struct stat *st)
{
    d->dev = st->st_dev;
    d->ino = st->st_ino;
    d->size = st->st_size;
    d->mtim = st->st_mtim;
    d->ctim = st->st_ctim;
}

static int dep_add(void *ctx, const char *path, const struct stat *st)
{
    struct zent *e = ctx;
    if (tern_grow((void **)&e->deps, &e->capdeps, e->ndeps + 1, sizeof(*e->deps)) < 0)
        return TERN_ENOMEM;
    struct dep *d = &e->deps[e->ndeps];
    if (!(d->path = strdup(path)))
        return TERN_ENOMEM;
    dep_set(d, st);
    e->ndeps++;
    return 0;
}

static bool dep_unchanged(const struct dep *d)
{
    struct stat st;
    if (stat(d->path, &st) < 0)
        return false;
    return st.st_dev == d->dev && st.st_ino == d->ino && st.st_size == d->size &&
           st.st_mtim.tv_sec == d->mtim.tv_sec && st.st_mtim.tv_nsec == d->mtim.tv_nsec &&
           st.st_ctim.tv_sec == d->ctim.tv_sec && st.st_ctim.tv_nsec == d->ctim.tv_nsec;
}

/* View generations handed out (answer_view_t.gen); 0 is never one. */
static uint64_t view_gens;

/* The old snapshot's entries by key, for reusable(): built once per reload, so matching 10,000
 * zones is linear, not quadratic. Open addressing over indices into old->z. */
typedef struct old_index {
    const struct snapshot *old;
    uint32_t *slot; /* index + 1; 0 = empty */
    size_t mask;
} old_index_t;

static int old_index_init(old_index_t *ix, const struct snapshot *old)
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
static const struct zent *find_key(const old_index_t *ix, const char *key)
{
    if (!ix->slot)
        return NULL;
    for (size_t j = tern_hash_str(key) & ix->mask; ix->slot[j]; j = (j + 1) & ix->mask)
        if (strcmp(ix->old->z[ix->slot[j] - 1].key, key) == 0)
            return &ix->old->z[ix->slot[j] - 1];
    return NULL;
}

/* The old entry for the same origin, file and format whose files are all unchanged, or NULL. */
static const struct zent *reusable(const old_index_t *ix, const char *key, const char *file,
                                   config_zone_format_t format, const char *signing, bool quick)
{
    const struct zent *e = find_key(ix, key);
    if (!e || e->src || strcmp(e->file, file) != 0 || e->format != format ||
        strcmp(e->signing ? e->signing : "", signing) != 0)
        return NULL;
    if (quick)
        return e;
    for (size_t d = 0; d < e->ndeps; d++)
        if (!dep_unchanged(&e->deps[d]))
            return NULL;
    return e;
}

/* A changed master file is read as a change of the version served (zone_file_patch()): the
 * new version shares every node page, RRset and byte it does not change, so a reload holds
 * little more than one copy of the zone and takes the time of reading the file, not of building
 * it. Not for zones signed by tern (signatures are made per build), nor when health checks or
 * the geo databases changed (every record is looked at again). The old entry, or NULL. */
static const struct zent *patch_base(const old_index_t *ix, const struct zent *e,
                                     const config_zone_t *cz, bool health_changed)
{
    const struct zent *old = find_key(ix, e->key);
    if (!old || old->src || !old->zone || old->zone->dnssec || old->zone->unavailable ||
        health_changed || cz->format != CONFIG_ZONE_RFC1035 || old->format != cz->format ||
        cz->ndnssec_keys || (old->signing && old->signing[0]) || strcmp(old->file, e->file) != 0)
        return NULL;
    return old;
}

static int copy_deps(struct zent *dst, const struct zent *src)
{
    for (size_t j = 0; j < src->ndeps; j++) {
        const struct dep *d = &src->deps[j];
        struct stat st = {.st_dev = d->dev, .st_ino = d->ino, .st_size = d->size};
        st.st_mtim = d->mtim;
        st.st_ctim = d->ctim;
        if (dep_add(dst, d->path, &st) < 0)
            return TERN_ENOMEM;
    }
    return 0;
}

/*
 * The MaxMind DB at path for one role ("geoip_db" / "geoip_db_v6"): prev again when it is the same
 * unchanged file, else the file opened anew. A file that does not open fails the whole reload
 * (the old snapshot keeps its database). *changed tells whether a new file was opened.
 */
static int geo_ref_get(struct geo_ref *prev, const char *path, const char *role, bool quick,
                       struct geo_ref **out, bool *changed, char *err, size_t errlen)
{
    if (prev && strcmp(prev->dep.path, path) == 0 && (quick || dep_unchanged(&prev->dep))) {
        prev->refs++;
        *out = prev;
        return 0;
    }
    char gerr[512] = "";
    struct stat st;
    struct geo_ref *g = calloc(1, sizeof(*g));
    if (!g) {
        snprintf(err, errlen, "out of memory");
        return TERN_ENOMEM;
    }
    /* stat first: a file replaced in between is seen as changed by the next reload */
    if (stat(path, &st) < 0 || !(g->db = geoip_open(path, gerr, sizeof(gerr)))) {
        snprintf(err, errlen, "%s: %s", role, gerr[0] ? gerr : strerror(errno));
        free(g);
        return TERN_EINVAL;
    }
    g->refs = 1;
    dep_set(&g->dep, &st);
    if (!(g->dep.path = strdup(path))) {
        geoip_close(g->db);
        free(g);
        snprintf(err, errlen, "out of memory");
        return TERN_ENOMEM;
    }
    log_info("%s %s: %s", role, path, geoip_describe(g->db));
    *out = g;
    *changed = true;
    return 0;
}

/* zone_json's locate callback: a record address's coordinates from the snapshot's DBs. */
static bool locate(void *ctx, int family, const uint8_t *addr, double *lat, double *lon)
{
    const geoip_set_t *set = ctx;
    geoip_result_t r;
    geoip_set_lookup(set, family == 4 ? AF_INET : family == 6 ? AF_INET6 : family, addr, &r);
    if (!r.has_location)
        return false;
    *lat = r.lat;
    *lon = r.lon;
    return true;
}

/*
 * The ASN table of cfg. asn_table alone: that file, mapped. asn_db: the MaxMind ASN database
 * compiled into asn_table when that is set too, else into "<asn_db>.tern-asn" beside it
 * (asn_compile_cached(): reused while it matches the database, compiled again when the database
 * changed), then mapped. prev is shared while its file is unchanged and, with asn_db, the
 * database is still the one it was compiled from. A database or table that fails leaves prev
 * answering (the reload fails with the reason). The compile runs here, on the loader thread.
 */
static int asn_ref_get(struct asn_ref *prev, const config_t *cfg, bool quick, struct asn_ref **out,
                       char *err, size_t errlen)
{
    const char *role = cfg->asn_db ? "asn_db" : "asn_table";
    char *path = cfg->asn_table ? strdup(cfg->asn_table) : asn_compile_default_cache(cfg->asn_db);
    char aerr[512] = "";
    struct asn_ref *a = NULL;
    bool rebuilt = false;
    asn_compile_stats_t cst;
    int64_t t0 = tern_monotonic_ms();
    int rc = TERN_ENOMEM;
    if (!path)
        goto nomem;
    bool same = prev && strcmp(prev->dep.path, path) == 0;
    if (same && (quick || (dep_unchanged(&prev->dep) &&
                           (!cfg->asn_db || asn_compile_source_unchanged(prev->t, cfg->asn_db)))))
        goto share;
    if (cfg->asn_db) {
        if ((rc = asn_compile_cached(cfg->asn_db, path, &cst, &rebuilt, aerr, sizeof(aerr))) < 0)
            goto fail;
        if (!rebuilt && same && dep_unchanged(&prev->dep))
            goto share; /* the database was touched, not changed */
    }
    struct stat st;
    if (!(a = calloc(1, sizeof(*a))))
        goto nomem;
    /* stat first: a file replaced in between is seen as changed by the next reload */
    if (stat(path, &st) < 0 || !(a->t = asn_table_open(path, aerr, sizeof(aerr)))) {
        rc = TERN_EINVAL;
        if (!aerr[0])
            snprintf(aerr, sizeof(aerr), "%s: %s", path, strerror(errno));
        goto fail;
    }
    a->refs = 1;
    dep_set(&a->dep, &st);
    a->dep.path = path;
    *out = a;
    size_t v4, v6, names;
    asn_table_counts(a->t, &v4, &v6, &names);
    if (rebuilt)
        log_info("asn_db %s: compiled into %s in %lld ms: %zu networks, %zu IPv4 and %zu IPv6 "
                 "entries, %zu names",
                 cfg->asn_db, path, (long long)(tern_monotonic_ms() - t0), cst.networks, v4, v6,
                 names);
    else if (cfg->asn_db)
        log_info("asn_db %s: mapped %s (compiled before from this file), %zu IPv4 and %zu IPv6 "
                 "entries, %zu names",
                 cfg->asn_db, path, v4, v6, names);
    else
        log_info("asn_table %s: mapped, %zu IPv4 and %zu IPv6 entries, %zu names", path, v4, v6,
                 names);
    return 0;
share:
    prev->refs++;
    *out = prev;
    free(path);
    return 0;
nomem:
    snprintf(aerr, sizeof(aerr), "out of memory");
fail:
    snprintf(err, errlen, "%s: %s", role, aerr[0] ? aerr : tern_strerror(rc));
    free(a);
    free(path);
    return rc;
}

/* The source that owns configured zone cz (keeps its versions: served()), or NULL: a file. */
static zone_source_t *owner(const loader_t *l, const config_zone_t *cz)
{
    for (size_t i = 0; i < l->nsrc; i++)
        if (l->src[i]->ops->owns && l->src[i]->ops->owns(cz))
            return l->src[i];
    return NULL;
}

/* build(): configured zone cz, as its source src serves it, into s. */
static int add_served(struct snapshot *s, const old_index_t *ix, zone_source_t *src,
                      const config_zone_t *cz, size_t *changed, char *err, size_t errlen)
{
    struct zent *e = &s->z[s->nz++];
    if (!(e->key = zone_source_key(cz->origin)) || !(e->file = strdup(cz->file ? cz->file : "")) ||
        !(e->signing = strdup(""))) {
        snprintf(err, errlen, "out of memory");
        return TERN_ENOMEM;
    }
    const zone_source_zone_t *sz = src->ops->served(src, e->key, cz);
    if (!sz) {
        snprintf(err, errlen, "out of memory");
        return TERN_ENOMEM;
    }
    e->format = CONFIG_ZONE_RFC1035;
    e->zone = zone_retain(sz->zone);
    e->loaded = sz->loaded;
    e->version = sz->version;
    const struct zent *prev = find_key(ix, e->key);
    e->fresh = !prev || prev->version != e->version;
    if (e->fresh)
        (*changed)++;
    s->records += e->zone->rr_count;
    s->bytes += zone_footprint(e->zone);
    int rc = zone_table_add(s->table, e->zone);
    if (rc < 0) {
        zone_free(e->zone);
        e->zone = NULL;
        if (rc == TERN_EDUPZONE)
            snprintf(err, errlen, "zone %s is configured twice", cz->origin);
        else
            snprintf(err, errlen, "zone %s: %s", cz->origin, tern_strerror(rc));
        return rc;
    }
    return 0;
}

/* The zones the sources add by themselves (Redis), in the table's order. */
static size_t source_zone_count(const loader_t *l)
{
    size_t n = 0, k;
    for (size_t i = 0; i < l->nsrc; i++)
        if (l->src[i]->ops->zones) {
            (void)l->src[i]->ops->zones(l->src[i], &k);
            n += k;
        }
    return n;
}

/* build(): source src's zone r into s, unless a zone of that name is already there (a
 * configured one wins; files indexes s's configured zones). 0, or a negative code. */
static int add_source_zone(struct snapshot *s, const old_index_t *ix, const old_index_t *files,
                           zone_source_t *src, zone_source_zone_t *r, size_t *changed, char *err,
                           size_t errlen)
{
    const char *name = src->ops->name;
    if (find_key(files, r->key)) {
        if (!r->conflict_logged)
            log_err("%s: zone %s is also configured from a file; serving the file", name, r->key);
        r->conflict_logged = true;
        return 0;
    }
    struct zent *e = &s->z[s->nz++];
    if (!(e->key = strdup(r->key)) || !(e->file = strdup(r->zone->source))) {
        snprintf(err, errlen, "out of memory");
        return TERN_ENOMEM;
    }
    e->src = src;
    e->format = CONFIG_ZONE_JSON;
    e->loaded = r->loaded;
    e->version = r->version;
    const struct zent *prev = find_key(ix, r->key);
    e->fresh = !prev || prev->src != src || prev->version != r->version;
    e->zone = zone_retain(r->zone);
    int rc = zone_table_add(s->table, e->zone);
    if (rc == TERN_EDUPZONE) {
        /* Keys are canonical, so this is a second entry for a zone already in the table:
         * skipped, never a reason to fail the file zones' reload. */
        if (!r->conflict_logged)
            log_err("%s: zone %s is in the set twice; serving the first", name, r->key);
        r->conflict_logged = true;
        zone_free(e->zone);
        zent_clear(e);
        memset(e, 0, sizeof(*e));
        s->nz--;
        return 0;
    }
    if (rc < 0) {
        zone_free(e->zone);
        e->zone = NULL;
        snprintf(err, errlen, "%s zone %s: %s", name, r->key, tern_strerror(rc));
        return rc;
    }
    if (e->fresh)
        (*changed)++;
    s->records += r->zone->rr_count;
    s->bytes += zone_footprint(r->zone);
    return 0;
}

/* build(): every source's own zones after the configured ones; a configured zone of the same
 * name wins. The configured zones are indexed once, so 10,000 zones of each are matched in
 * linear time. */
static int add_source_zones(loader_t *l, struct snapshot *s, const old_index_t *ix, size_t *changed,
                            char *err, size_t errlen)
{
    if (!source_zone_count(l))
        return 0;
    old_index_t files;
    if (old_index_init(&files, s) < 0) {
        snprintf(err, errlen, "out of memory");
        return TERN_ENOMEM;
    }
    int rc = 0;
    for (size_t i = 0; i < l->nsrc && rc == 0; i++) {
        size_t n = 0;
        zone_source_zone_t *z = l->src[i]->ops->zones ? l->src[i]->ops->zones(l->src[i], &n) : NULL;
        for (size_t k = 0; k < n && rc == 0; k++)
            rc = add_source_zone(s, ix, &files, l->src[i], &z[k], changed, err, errlen);
    }
    free(files.slot);
    return rc;
}

/* What the passes of one build share. */
typedef struct build {
    loader_t *l;
    const struct snapshot *old; /* the view served, or NULL */
    const config_t *cfg;
    bool quick;          /* a change of the sources: the files are not looked at again */
    old_index_t ix;      /* old's zones by key */
    health_index_t *hx;  /* cfg's checks by address, or NULL */
    bool geo_changed;    /* the geo databases changed: JSON zones are read again */
    bool health_changed; /* the checks changed: every zone is read again */
    size_t changed;      /* zones that are not the very version old had */
    char *err;
    size_t errlen;
} build_t;

static int nomem(build_t *b)
{
    snprintf(b->err, b->errlen, "out of memory");
    return TERN_ENOMEM;
}

/* Pass 1: the geo databases (JSON zones locate their records with them at load time, so a
 * changed database also reads every JSON zone again). */
static int build_geo(build_t *b, struct snapshot *s)
{
    const struct snapshot *old = b->old;
    const config_t *cfg = b->cfg;
    int rc;
    b->geo_changed = (old && old->geo_v4) != (cfg->geoip_db != NULL) ||
                     (old && old->geo_v6) != (cfg->geoip_db_v6 != NULL);
    if (cfg->geoip_db &&
        (rc = geo_ref_get(old ? old->geo_v4 : NULL, cfg->geoip_db, "geoip_db", b->quick,
                          &s->geo_v4, &b->geo_changed, b->err, b->errlen)) < 0)
        return rc;
    if (cfg->geoip_db_v6 &&
        (rc = geo_ref_get(old ? old->geo_v6 : NULL, cfg->geoip_db_v6, "geoip_db_v6", b->quick,
                          &s->geo_v6, &b->geo_changed, b->err, b->errlen)) < 0)
        return rc;
    if (s->geo_v6 && geoip_ip_version(s->geo_v6->db) != 6) {
        snprintf(b->err, b->errlen, "geoip_db_v6: %s is an IPv4 database (ip_version 4)",
                 cfg->geoip_db_v6);
        return TERN_EINVAL;
    }
    s->view.geoip.v4 = s->geo_v4 ? s->geo_v4->db : NULL;
    s->view.geoip.v6 = s->geo_v6                                           ? s->geo_v6->db
                       : s->geo_v4 && geoip_ip_version(s->geo_v4->db) == 6 ? s->geo_v4->db
                                                                           : NULL;
    return 0;
}

/* read_zone(): ask src for a new version of cz for entry e (base: the version to patch, or
 * NULL). The result codes of zone_source_ops_t.read. */
static int source_read(build_t *b, const struct snapshot *s, zone_source_t *src, struct zent *e,
                       const config_zone_t *cz, const zone_t *base, const uint8_t *dnskeys,
                       size_t dnskeys_len, zone_t **z)
{
    const zone_source_read_t rd = {
        .cz = cz,
        .base = base,
        .seen = dep_add,
        .seen_ctx = e,
        .health_fn = b->hx ? health_index_lookup : NULL,
        .health_ctx = b->hx,
        .health = b->cfg->health.enabled ? b->l->health : NULL,
        .locate = s->view.geoip.v4 || s->view.geoip.v6 ? locate : NULL,
        .locate_ctx = (void *)&s->view.geoip,
        .dnskeys = dnskeys,
        .dnskeys_len = dnskeys_len,
    };
    return src->ops->read(src, &rd, z, b->err, b->errlen);
}

/* add_read(): configured zone cz read anew by src into e (a changed master file first as a
 * patch of the version served, see patch_base()). A zone tern signs gets its keys first (the
 * builder adds their DNSKEYs) and its signatures once it is built. 0 or a negative code. */
static int read_zone(build_t *b, const struct snapshot *s, zone_source_t *src, struct zent *e,
                     const config_zone_t *cz, zone_t **out)
{
    dnssec_zone_t *dz = NULL;
    uint8_t dnskeys[ZONE_SIGN_DNSKEYS_MAX];
    size_t dnskeys_len = 0;
    zone_t *z = NULL;
    int rc;
    if (cz->ndnssec_keys && (rc = zone_sign_prepare(cz, b->cfg, dep_add, e, &dz, dnskeys,
                                                    &dnskeys_len, b->err, b->errlen)) < 0)
        return rc;
    const struct zent *base = dz ? NULL : patch_base(&b->ix, e, cz, b->health_changed);
    rc = base ? source_read(b, s, src, e, cz, base->zone, NULL, 0, &z) : ZONE_FILE_BUILD;
    if (rc == ZONE_FILE_BUILD) {
        if (base)
            deps_clear(e); /* the patch attempt's (a signed zone has no base: its keys stay) */
        rc = source_read(b, s, src, e, cz, NULL, dz ? dnskeys : NULL, dnskeys_len, &z);
        if (rc >= 0 && dz)
            rc = zone_sign_attach(z, dz, b->err, b->errlen); /* frees dz on failure */
        else if (dz)
            dnssec_zone_free(dz);
        if (rc < 0 && dz && z)
            zone_free(z);
    }
    if (rc < 0) {
        if (!b->err[0])
            snprintf(b->err, b->errlen, "%s: %s", cz->file, tern_strerror(rc));
        return rc;
    }
    if (rc == ZONE_FILE_SAME) {
        /* the file was touched, its records are the served ones: nothing to publish */
        z = zone_retain(base->zone);
        e->loaded = base->loaded;
        e->version = base->version;
    } else {
        b->changed++;
        e->loaded = (int64_t)time(NULL);
        e->fresh = true;
        e->version = zone_source_version();
    }
    *out = z;
    return 0;
}

/* Pass 2a: configured zone cz, read by src (files): the version served again while none of
 * its files changed, else read_zone(). */
static int add_read(build_t *b, struct snapshot *s, zone_source_t *src, const config_zone_t *cz)
{
    struct zent *e = &s->z[s->nz++];
    if (!(e->key = zone_source_key(cz->origin)) || !(e->file = strdup(cz->file)) ||
        !(e->signing = zone_sign_ident(cz, b->cfg)))
        return nomem(b);
    e->format = cz->format;
    const struct zent *prev = reusable(&b->ix, e->key, e->file, e->format, e->signing, b->quick);
    if (prev && ((cz->format == CONFIG_ZONE_JSON && b->geo_changed) || b->health_changed))
        prev = NULL;
    zone_t *z = NULL;
    int rc;
    if (prev) {
        if (copy_deps(e, prev) < 0)
            return nomem(b);
        z = zone_retain(prev->zone);
        e->loaded = prev->loaded;
        e->version = prev->version;
    } else if ((rc = read_zone(b, s, src, e, cz, &z)) < 0) {
        return rc;
    }
    e->zone = z;
    s->records += z->rr_count;
    s->bytes += zone_footprint(z);
    if ((rc = zone_table_add(s->table, z)) < 0) {
        zone_free(z);
        if (rc == TERN_EDUPZONE)
            snprintf(b->err, b->errlen, "zone %s (%s) is configured twice", cz->origin, cz->file);
        else
            snprintf(b->err, b->errlen, "zone %s: %s", cz->origin, tern_strerror(rc));
        return rc;
    }
    return 0;
}

/* Pass 2: every configured zone, in configuration order, from the source that owns it. */
static int add_configured(build_t *b, struct snapshot *s)
{
    int rc;
    for (size_t i = 0; i < b->cfg->nzones; i++) {
        const config_zone_t *cz = &b->cfg->zones[i];
        if (!cz->file && !cz->nprimaries)
            continue; /* transfer settings of a zone from Redis (tern/xfr) */
        zone_source_t *src = owner(b->l, cz);
        if (!src) /* config_check_complete() gives every zone a format */
            continue;
        rc = src->ops->served ? add_served(s, &b->ix, src, cz, &b->changed, b->err, b->errlen)
                              : add_read(b, s, src, cz);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Pass 4: what the view holds beside its zones, and the table frozen. */
static int finish_view(build_t *b, struct snapshot *s)
{
    const struct snapshot *old = b->old;
    const config_t *cfg = b->cfg;
    loader_t *l = b->l;
    int rc;
    if ((cfg->asn_table || cfg->asn_db) &&
        (rc = asn_ref_get(old ? old->asn : NULL, cfg, b->quick, &s->asn, b->err, b->errlen)) < 0)
        return rc;
    if (zone_table_freeze(s->table) < 0)
        return nomem(b);
    s->view.table = s->table;
    s->view.asn = s->asn ? s->asn->t : NULL;
    /* The workers cache geo lookups per view generation: a new one only when a database
     * changed, so source publishes and zone reloads keep the caches warm. */
    if (old && old->asn == s->asn && old->geo_v4 == s->geo_v4 && old->geo_v6 == s->geo_v6)
        s->view.gen = old->view.gen;
    else
        s->view.gen = __atomic_add_fetch(&view_gens, 1, __ATOMIC_RELAXED);
    int lrc = 0;
    s->limit = l->limits ? limit_new(l->limits, cfg, &lrc) : NULL;
    if (lrc < 0) {
        snprintf(b->err, b->errlen, "limits: %s", tern_strerror(lrc));
        return lrc;
    }
    s->view.limit = s->limit;
    zone_source_t *aname = source_named(l, "aname");
    s->aname = aname ? source_aname_results(aname) : NULL;
    s->view.aname = s->aname;
    for (size_t i = 0; i < s->nz && !s->view.dnssec; i++)
        s->view.dnssec = s->z[i].zone && s->z[i].zone->dnssec;
    s->view.cfg.edns_max_udp = cfg->edns_max_udp;
    s->view.cfg.xfr = l->xfr && xfr_wanted(cfg);
    s->view.cfg.identity = s->identity;
    s->view.cfg.version = s->version;
    return 0;
}

/*
 * Build a complete snapshot for cfg, sharing the unchanged zones of old (may be NULL), in named
 * passes: geo databases → configured zones → the sources' own zones → the rest of the view.
 * 0 with *out, or a negative code with the message in err.
 */
static int build(loader_t *l, const struct snapshot *old, const config_t *cfg, bool quick,
                 struct snapshot **out, size_t *changed, char *err, size_t errlen)
{
    build_t b = {.l = l, .old = old, .cfg = cfg, .quick = quick, .err = err, .errlen = errlen};
    struct snapshot *s = NULL;
    int rc = TERN_ENOMEM;
    *out = NULL;
    *changed = 0;
    err[0] = '\0';
    if (old_index_init(&b.ix, old) < 0)
        return nomem(&b);
    bool nomem_hx;
    /* Health checks by address: every zone is built again when they change (or when health
     * checking is turned on or off), so its records point at the right endpoints. */
    b.hx = health_index_new(l->health, &cfg->health, &nomem_hx);
    b.health_changed = old && !config_same_health_checks(&l->cfg_last->health, &cfg->health);
    if (nomem_hx || !(s = calloc(1, sizeof(*s))) || !(s->table = zone_table_new()) ||
        !(s->z = calloc(cfg->nzones + source_zone_count(l) + 1, sizeof(*s->z))) ||
        (cfg->identity && !(s->identity = strdup(cfg->identity))) ||
        (cfg->version && !(s->version = strdup(cfg->version))))
        rc = nomem(&b);
    else if ((rc = build_geo(&b, s)) >= 0 && (rc = add_configured(&b, s)) >= 0 &&
             (rc = add_source_zones(l, s, &b.ix, &b.changed, err, errlen)) >= 0)
        rc = finish_view(&b, s);
    free(b.ix.slot);
    health_index_free(b.hx);
    if (rc < 0) {
        snapshot_free(s);
        return rc;
    }
    *changed = b.changed;
    *out = s;
    return 0;
}

/* Options bound at startup: a reload that changes them cannot apply them, and says so. */
static void warn_restart_only(const config_t *a, const config_t *b)
{
    char keys[320]; /* holds every restart-only key (tern/conf/config.h) */
    size_t n = config_restart_only_changes(a, b, keys, sizeof(keys));
    if (n)
        log_warn("reload: %s changed; %s only on restart", keys,
                 n == 1 ? "it applies" : "they apply");
}

static void set_error(loader_t *l, const char *msg)
{
    snprintf(l->stats.last_error, sizeof(l->stats.last_error), "%s", msg);
}

/* At most this many per-zone lines per reload; a mass change is summarised. */
#define LOG_ZONES_MAX 20

/* Log what a reload changed, zone by zone: added, reloaded (serials), removed. */
static void log_changes(const struct snapshot *old, const struct snapshot *s)
{
    old_index_t in_old, in_new;
    if (old_index_init(&in_old, old) < 0 || old_index_init(&in_new, s) < 0) {
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
        const struct zent *p = find_key(&in_old, e->key);
        if (!p)
            log_info("zone %s: added (serial %u)", e->key, e->zone->serial);
        else if (p->zone->serial == e->zone->serial)
            log_info("zone %s: reloaded, serial %u unchanged", e->key, e->zone->serial);
        else
            log_info("zone %s: reloaded, serial %u -> %u", e->key, p->zone->serial,
                     e->zone->serial);
    }
    for (size_t i = 0; old && i < old->nz; i++) {
        if (old->z[i].src || find_key(&in_new, old->z[i].key))
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

/* Each zone of s that is not the very version old had goes to the transfer side (journal,
 * NOTIFY); zones without transfer settings cost it one lookup. */
static void xfr_sync(loader_t *l, const struct snapshot *old, const struct snapshot *s)
{
    old_index_t ix;
    if (old_index_init(&ix, old) < 0) {
        log_err("xfr: out of memory; this publish is not journaled (secondaries get AXFR)");
        return;
    }
    for (size_t i = 0; i < s->nz; i++) {
        const struct zent *e = &s->z[i];
        const struct zent *o = find_key(&ix, e->key);
        if (o && o->zone == e->zone)
            continue;
        xfr_zone_changed(l->xfr, e->key, o ? o->zone : NULL, e->zone);
    }
    free(ix.slot);
}

/* Publish s and free what it replaces once no worker can still see it. */
static void publish(loader_t *l, struct snapshot *s)
{
    pthread_mutex_lock(&l->mu); /* loader_zones() reads l->cur under it */
    struct snapshot *old = l->cur;
    l->cur = s;
    pthread_mutex_unlock(&l->mu);
    const answer_view_t *prev = tern_rcu_xchg(&l->published, &s->view);
    (void)prev; /* == &old->view */
    if (l->xfr)
        xfr_sync(l, old, s);
    if (old) {
        tern_rcu_synchronize();
        snapshot_free(old);
    }
    /* the builder's scratch and the old table: give the pages back now, not after decay */
    mem_arena_purge(l->arena);
    for (size_t i = 0; i < l->nsrc; i++)
        if (l->src[i]->ops->published)
            l->src[i]->ops->published(l->src[i], s->table, l->cfg_last);
}

/* ---- the sources' changes (tern/source/zone_source.h) ------------------------------------ */

/* zone_sink_t.push: a source's thread queues a change for the loader thread. */
static int sink_push(void *ctx, const zone_change_t *c)
{
    loader_t *l = ctx;
    pthread_mutex_lock(&l->mu);
    if (tern_grow((void **)&l->chg, &l->capchg, l->nchg + 1, sizeof(*l->chg)) < 0) {
        pthread_mutex_unlock(&l->mu);
        return TERN_ENOMEM;
    }
    l->chg[l->nchg++] = *c;
    l->changes = true;
    pthread_cond_signal(&l->wake);
    pthread_mutex_unlock(&l->mu);
    return 0;
}

/* zone_sink_t.poke: a source's thread holds new state for the view (collect() takes it). */
static void sink_poke(void *ctx, zone_source_t *src)
{
    loader_t *l = ctx;
    pthread_mutex_lock(&l->mu);
    for (size_t i = 0; i < l->nsrc; i++)
        if (l->src[i] == src)
            l->poked[i] = true;
    l->changes = true;
    pthread_cond_signal(&l->wake);
    pthread_mutex_unlock(&l->mu);
}

/* zone_sink_t.drop: loader thread; src stopped its thread and dropped its zones. */
static void sink_drop(void *ctx, zone_source_t *src)
{
    loader_t *l = ctx;
    pthread_mutex_lock(&l->mu);
    size_t k = 0;
    for (size_t i = 0; i < l->nchg; i++) {
        if (l->chg[i].src == src)
            zone_change_clear(&l->chg[i]);
        else
            l->chg[k++] = l->chg[i];
    }
    l->nchg = k;
    pthread_mutex_unlock(&l->mu);
}

/* Loader thread: every queued change to its source's apply() (a run of one source's changes in
 * one call, in arrival order), then collect() of every poked source. touched[i]: source i
 * changed what the view serves. True when any did. */
static bool take_changes(loader_t *l, bool *touched)
{
    pthread_mutex_lock(&l->mu);
    zone_change_t *c = l->chg;
    size_t n = l->nchg;
    l->chg = NULL;
    l->nchg = l->capchg = 0;
    l->changes = false;
    for (size_t i = 0; i < l->nsrc; i++) {
        touched[i] = l->poked[i];
        l->poked[i] = false;
    }
    pthread_mutex_unlock(&l->mu);
    bool any = false;
    for (size_t i = 0; i < l->nsrc; i++) {
        zone_source_t *src = l->src[i];
        if (touched[i])
            touched[i] = src->ops->collect && src->ops->collect(src);
        for (size_t j = 0; j < n;) {
            size_t run = 0;
            while (j + run < n && c[j + run].src == src)
                run++;
            if (run)
                touched[i] |= src->ops->apply(src, c + j, run) > 0;
            j += run ? run : 1;
        }
        any |= touched[i];
    }
    free(c);
    return any;
}

/* Any thread (a source's): locate a record's address through the current geo databases. */
static bool src_locate(void *ctx, int family, const uint8_t *addr, double *lat, double *lon)
{
    loader_t *l = ctx;
    pthread_mutex_lock(&l->geo_mu);
    bool ok = (l->sgeo.v4 || l->sgeo.v6) && locate(&l->sgeo, family, addr, lat, lon);
    pthread_mutex_unlock(&l->geo_mu);
    return ok;
}

/* Loader thread (a source's apply()): secondaries follow zone key. */
static bool src_followed(void *ctx, const char *key)
{
    loader_t *l = ctx;
    return l->xfr && xfr_zone_wanted(l->xfr, key);
}

/* Loader thread: point src_locate() at snapshot s's databases. True when they differ from the
 * ones it used (the sources' zones then need their records located again). */
static bool sources_set_geo(loader_t *l, const struct snapshot *s)
{
    struct geo_ref *v4 = s->geo_v4, *v6 = s->geo_v6;
    if (v4 == l->sgeo_v4 && v6 == l->sgeo_v6)
        return false;
    if (v4)
        v4->refs++;
    if (v6)
        v6->refs++;
    pthread_mutex_lock(&l->geo_mu);
    struct geo_ref *o4 = l->sgeo_v4, *o6 = l->sgeo_v6;
    l->sgeo_v4 = v4;
    l->sgeo_v6 = v6;
    l->sgeo = s->view.geoip;
    pthread_mutex_unlock(&l->geo_mu);
    geo_ref_put(o4);
    geo_ref_put(o6);
    return true;
}

/* Loader thread: every source follows cfg (prev: the config in force before, NULL at start).
 * At start the first failure fails it; on a reload sources log and go on. */
static int sources_configure(loader_t *l, const config_t *cfg, const config_t *prev,
                             bool geo_changed)
{
    for (size_t i = 0; i < l->nsrc; i++) {
        zone_source_t *src = l->src[i];
        int rc = src->ops->configure ? src->ops->configure(src, cfg, prev, geo_changed) : 0;
        if (rc < 0 && !prev)
            return rc;
    }
    return 0;
}

/* Make every source of the table, with the loader's sink. 0 or TERN_ENOMEM. */
static int sources_new(loader_t *l)
{
    size_t n;
    const zone_source_ops_t *const *ops = zone_source_table(&n);
    if (!(l->src = calloc(n, sizeof(*l->src))) ||
        !(l->src_publishes = calloc(n, sizeof(*l->src_publishes))) ||
        !(l->poked = calloc(n, sizeof(*l->poked))) ||
        !(l->touched = calloc(n, sizeof(*l->touched))))
        return TERN_ENOMEM;
    const zone_source_env_t env = {
        .sink = {.push = sink_push, .poke = sink_poke, .drop = sink_drop, .ctx = l},
        .health = l->health,
        .locate = src_locate,
        .locate_ctx = l,
        .followed = src_followed,
        .followed_ctx = l,
    };
    for (; l->nsrc < n; l->nsrc++)
        if (!(l->src[l->nsrc] = ops[l->nsrc]->new (&env)))
            return TERN_ENOMEM;
    return 0;
}

/* Hand cfg's health settings to the checker, made (libcurl loaded) the first time they enable
 * health checking. Without a checker the endpoints stay unknown and every record is served. */
static void health_configure(loader_t *l, const config_t *cfg)
{
    if (!l->checker && cfg->health.enabled && !(l->checker = health_checker_new(l->health)))
        return; /* logged */
    if (l->checker && health_checker_configure(l->checker, &cfg->health) < 0)
        log_err("health: out of memory; the checker keeps its previous settings");
}

/* The limit thread (log lines of limited prefixes, cookie secret rotation) runs once RRL or
 * cookies are on. */
static void limit_follow(loader_t *l, const config_t *cfg)
{
    if (l->limits && (cfg->rrl.enabled || cfg->cookies.enabled) && l->started &&
        limit_shared_start(l->limits) < 0)
        log_err("limits: newly limited prefixes are not logged and the cookie secret is not "
                "rotated");
}

/* health_configure(), then start the checker the first time the settings enable it (once the
 * loader thread runs: not for --check-config). Also the limit thread (limit_follow()). */
static void health_follow(loader_t *l, const config_t *cfg)
{
    limit_follow(l, cfg);
    health_configure(l, cfg);
    if (l->checker && cfg->health.enabled && !l->checker_started && l->started)
        l->checker_started = health_checker_start(l->checker) == 0;
}

/* The config as a start would take it: config_fn (the file, the command line over it), then
 * what a start requires of the whole. A reload also checks what the config names outside
 * ternd (users, groups, run directories; startup does that itself, creating the directories),
 * so a config that could not start never replaces one that did. */
static int read_config(loader_t *l, config_t *cfg, bool reloading, char *err, size_t errlen)
{
    int rc = l->config_fn(l->config_ctx, cfg, err, errlen);
    if (rc < 0) {
        if (!err[0])
            snprintf(err, errlen, "cannot read the configuration");
        return rc;
    }
    if ((rc = config_check_complete(cfg, err, errlen)) < 0)
        return rc;
    return reloading ? config_check_runtime(cfg, false, err, errlen) : 0;
}

/* recipe(): a new config takes effect once its view is built: logging at once (the target
 * switch is atomic per line), then every thread and source that follows the config; cfg
 * becomes the config in force (owned by the loader). */
static void follow_config(loader_t *l, config_t *cfg, const struct snapshot *s)
{
    log_set_level(cfg->log_level);
    log_set_target(cfg->log_target);
    bool geo_changed = sources_set_geo(l, s);
    health_follow(l, cfg);
    if (l->xfr && xfr_configure(l->xfr, cfg) < 0)
        log_err("xfr: out of memory; transfers keep their previous settings");
    (void)sources_configure(l, cfg, l->cfg_last, geo_changed);
    if (l->cfg_last != l->cfg0) {
        config_free(l->cfg_last);
        free(l->cfg_last);
    }
    l->cfg_last = cfg;
}

/* The recipe, on the loader thread, for every trigger alike: the changes taken in (cfg: a new
 * config, owned by the recipe from here; NULL: the sources' changes over the config in force,
 * whose files are not looked at again) → build, patching what changed and sharing the rest →
 * validate → sign → publish → retire the old view. 0 with *changed and the new view served
 * (l->cur), or a negative code with the reason in err: the view served stays. */
static int recipe(loader_t *l, config_t *cfg, size_t *changed, char *err, size_t errlen)
{
    struct snapshot *s;
    int rc = build(l, l->cur, cfg ? cfg : l->cfg_last, !cfg, &s, changed, err, errlen);
    if (rc < 0) {
        if (cfg) {
            config_free(cfg);
            free(cfg);
        }
        return rc;
    }
    if (cfg) {
        follow_config(l, cfg, s);
        log_changes(l->cur, s);
    }
    publish(l, s);
    return 0;
}

/* Loader thread: the changes take_changes() took in (touched), published alone. */
static void publish_taken(loader_t *l)
{
    char err[1024] = "";
    size_t changed;
    int64_t start = tern_monotonic_ms();
    if (recipe(l, NULL, &changed, err, sizeof(err)) < 0) {
        for (size_t i = 0; i < l->nsrc; i++)
            if (l->touched[i])
                log_err("%s: cannot publish %s: %s; still serving the previous %s",
                        l->src[i]->ops->name, l->src[i]->ops->what, err, l->src[i]->ops->previous);
        return;
    }
    pthread_mutex_lock(&l->mu);
    l->stats.zones = l->cur->nz;
    l->stats.records = l->cur->records;
    for (size_t i = 0; i < l->nsrc; i++)
        l->src_publishes[i] += l->touched[i];
    pthread_mutex_unlock(&l->mu);
    log_debug("loader: published %zu changed zones in %lld ms", changed,
              (long long)(tern_monotonic_ms() - start));
}

/* Loader thread: what the sources changed, built into one view with the configured zones and
 * databases as they are, and published. */
static void publish_changes(loader_t *l)
{
    if (take_changes(l, l->touched) && l->cfg_last && l->cur)
        publish_taken(l);
}

/* reload(): its outcome, counted and told to the listener. */
static void reload_done(loader_t *l, bool ok, const char *err, int64_t ms)
{
    pthread_mutex_lock(&l->mu);
    if (ok) {
        l->stats.reloads_ok++;
        l->stats.zones = l->cur->nz;
        l->stats.records = l->cur->records;
        l->stats.last_error[0] = '\0';
    } else {
        l->stats.reloads_failed++;
        set_error(l, err);
    }
    l->stats.last_ok = ok;
    l->stats.last_duration_ms = ms;
    l->stats.last_time = (int64_t)time(NULL);
    loader_stats_t snap = l->stats;
    pthread_mutex_unlock(&l->mu);
    if (l->listener)
        l->listener(l->listener_ctx, true, &snap);
}

/* One reload on the loader thread: the config read again, then the recipe. A config that fails
 * changes nothing (the sources' changes taken in are still published). */
static void reload(loader_t *l)
{
    char err[1024] = "";
    if (l->listener)
        l->listener(l->listener_ctx, false, NULL);
    int64_t start = tern_monotonic_ms();
    uint64_t gen = ++l->generation;
    config_t *cfg = calloc(1, sizeof(*cfg));
    size_t changed = 0;
    bool ok = false, taken = take_changes(l, l->touched);
    if (!cfg) {
        snprintf(err, sizeof(err), "out of memory");
    } else if (read_config(l, cfg, true, err, sizeof(err)) < 0) {
        /* nothing of it applies: the config and zones in force stay (logged below) */
        config_free(cfg);
        free(cfg);
    } else {
        warn_restart_only(l->cfg0, cfg);
        ok = recipe(l, cfg, &changed, err, sizeof(err)) == 0;
    }
    int64_t ms = tern_monotonic_ms() - start;
    if (ok)
        log_info("reload #%llu ok: %zu zones (%zu changed, %zu unchanged), %zu records "
                 "(%.1f MiB) in %lld ms",
                 (unsigned long long)gen, l->cur->nz, changed, l->cur->nz - changed,
                 l->cur->records, (double)l->cur->bytes / (1 << 20), (long long)ms);
    else
        log_err("reload #%llu failed: %s; still serving the previous config and data",
                (unsigned long long)gen, err);
    if (!ok && taken && l->cfg_last && l->cur)
        publish_taken(l);
    reload_done(l, ok, err, ms);
}

/* Reloads yield to the workers when they share a CPU: a large zone then takes longer to load,
 * but queries never wait for it. (Linux: nice is per thread.) */
#define LOADER_NICE 10

/* How often the loader looks for signatures near their refresh time: a minute is nothing
 * against a refresh window of days, and costs one pass over the zones. */
#define RESIGN_CHECK_S 60

/* Signatures made ahead that are due (dnssec_zone.h: less than `refresh` of them remains) are
 * made again and published in place of the old ones: the zone itself is untouched, nothing is
 * reloaded. A zone whose signing fails keeps its current signatures (logged; tried again at the
 * next check). */
static void resign_due(loader_t *l)
{
    struct snapshot *s = l->cur;
    uint32_t now = (uint32_t)time(NULL);
    for (size_t i = 0; s && i < s->nz; i++) {
        zone_t *z = s->z[i].zone;
        if (!z || !z->dnssec || !dnssec_zone_due(z->dnssec, now))
            continue;
        char err[512];
        dnssec_sigs_t *old = NULL;
        int64_t t0 = tern_monotonic_ms();
        if (dnssec_zone_sign(z->dnssec, z, now, &old, err, sizeof(err)) < 0) {
            log_err("dnssec: %s; the current signatures stay", err);
            continue;
        }
        const dnssec_sigs_t *sg = dnssec_zone_sigs(z->dnssec);
        log_info("dnssec: zone %s: %" PRIu64 " signatures made again in %" PRId64
                 " ms, valid until %u",
                 s->z[i].key, sg->made, tern_monotonic_ms() - t0, sg->expiration);
        tern_rcu_synchronize(); /* no worker reads the old set any more */
        dnssec_sigs_free(old);
    }
}

zone_source_t *loader_source(loader_t *l, const char *name)
{
    return source_named(l, name);
}

void loader_set_xfr(loader_t *l, struct xfr *x)
{
    l->xfr = x;
}

/* What wakes the loader thread, in the order it serves them. */
typedef enum trigger { TRIGGER_STOP, TRIGGER_RELOAD, TRIGGER_CHANGES, TRIGGER_RESIGN } trigger_t;

/* Under l->mu: the next trigger, waiting for one at most RESIGN_CHECK_S (then it is the
 * re-sign check's turn). */
static trigger_t next_trigger(loader_t *l)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += RESIGN_CHECK_S;
    for (;;) {
        if (l->stop)
            return TRIGGER_STOP;
        if (l->finished != l->requested)
            return TRIGGER_RELOAD;
        if (l->changes)
            return TRIGGER_CHANGES;
        if (pthread_cond_timedwait(&l->wake, &l->mu, &until) == ETIMEDOUT)
            return TRIGGER_RESIGN;
    }
}

static void *loader_main(void *arg)
{
    loader_t *l = arg;
    (void)pthread_setname_np(pthread_self(), "tern-loader");
    if (setpriority(PRIO_PROCESS, (id_t)gettid(), LOADER_NICE) < 0)
        log_debug("loader: cannot lower its priority");
    if (mem_thread_bind(l->arena) < 0)
        log_warn("loader: cannot bind to its jemalloc arena; using the default one");
    pthread_mutex_lock(&l->mu);
    /* A reload serves every request made before it started; ends on stop. */
    for (trigger_t t; (t = next_trigger(l)) != TRIGGER_STOP;) {
        uint64_t upto = l->requested;
        pthread_mutex_unlock(&l->mu);
        if (t == TRIGGER_RELOAD)
            reload(l);
        else if (t == TRIGGER_CHANGES)
            publish_changes(l);
        else
            resign_due(l);
        pthread_mutex_lock(&l->mu);
        if (t == TRIGGER_RELOAD) {
            l->finished = upto;
            pthread_cond_broadcast(&l->done);
        }
    }
    pthread_cond_broadcast(&l->done);
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

loader_t *loader_new(loader_config_fn fn, void *ctx)
{
    loader_t *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->config_fn = fn;
    l->config_ctx = ctx;
    l->arena = mem_arena_create();
    l->stats.last_duration_ms = -1;
    pthread_mutex_init(&l->mu, NULL);
    pthread_mutex_init(&l->geo_mu, NULL);
    pthread_cond_init(&l->wake, NULL);
    pthread_cond_init(&l->done, NULL);
    if (!(l->health = health_registry_new()) || sources_new(l) < 0) {
        loader_free(l);
        return NULL;
    }
    return l;
}

int loader_read_config(loader_t *l, const config_t **cfg_out)
{
    char err[1024] = "";
    if (l->cfg0) {
        *cfg_out = l->cfg0;
        return 0;
    }
    config_t *cfg = calloc(1, sizeof(*cfg));
    if (!cfg) {
        log_err("out of memory");
        return TERN_ENOMEM;
    }
    int rc = read_config(l, cfg, false, err, sizeof(err));
    if (rc < 0) {
        log_err("%s", err);
        config_free(cfg);
        free(cfg);
        return rc;
    }
    /* the configured log settings apply from the first line about the zones on */
    log_set_level(cfg->log_level);
    log_set_target(cfg->log_target);
    if (!(l->limits = limit_shared_new(cfg->workers))) {
        log_err("out of memory");
        config_free(cfg);
        free(cfg);
        return TERN_ENOMEM;
    }
    /* bound at startup, as the worker pools are */
    limit_shared_set_tcp(l->limits, cfg->tcp_max_per_client, cfg->tcp_client_prefix_v4,
                         cfg->tcp_client_prefix_v6);
    l->cfg0 = cfg;
    l->cfg_last = cfg;
    *cfg_out = cfg;
    return 0;
}

int loader_load_zones(loader_t *l)
{
    char err[1024];
    int64_t start = tern_monotonic_ms();
    unsigned home = mem_thread_arena();
    int rc = TERN_EINVAL;
    err[0] = '\0';
    const config_t *cfg = l->cfg0;
    if (!cfg || l->cur) {
        log_err("loader: zones loaded twice or before the configuration");
        return TERN_EINVAL;
    }
    if (mem_thread_bind(l->arena) < 0)
        home = MEM_NO_ARENA;
    struct snapshot *s;
    size_t changed;
    if (l->xfr && (rc = xfr_configure(l->xfr, cfg)) < 0) {
        log_err("xfr: out of memory");
        goto out;
    }
    rc = build(l, NULL, cfg, false, &s, &changed, err, sizeof(err));
    if (rc < 0) {
        log_err("%s", err);
        goto out;
    }
    publish(l, s);
    health_configure(l, cfg);
    (void)sources_set_geo(l, s);
    if ((rc = sources_configure(l, cfg, NULL, false)) < 0)
        goto out;
    /* the first read of every source with a thread, bounded, so the first answers have them */
    bool waited = false;
    for (size_t i = 0; i < l->nsrc; i++)
        if (l->src[i]->ops->wait_first)
            waited |= l->src[i]->ops->wait_first(l->src[i]);
    if (waited) {
        publish_changes(l);
        s = l->cur;
    }
    l->stats.zones = s->nz;
    l->stats.records = s->records;
    log_info("loaded %zu zones, %zu records (%.1f MiB) in %lld ms", s->nz, s->records,
             (double)s->bytes / (1 << 20), (long long)(tern_monotonic_ms() - start));
out:
    if (home != MEM_NO_ARENA && mem_thread_bind(home) < 0)
        log_warn("cannot return to the main thread's arena");
    return rc;
}

int loader_load(loader_t *l, const config_t **cfg_out)
{
    int rc = loader_read_config(l, cfg_out);
    return rc < 0 ? rc : loader_load_zones(l);
}

const answer_view_t *const *loader_published(const loader_t *l)
{
    return &l->published;
}

void loader_set_listener(loader_t *l, loader_listener_fn fn, void *ctx)
{
    l->listener = fn;
    l->listener_ctx = ctx;
}

int loader_start(loader_t *l)
{
    int e = pthread_create(&l->thread, NULL, loader_main, l);
    if (e != 0) {
        log_err("cannot start the loader thread: %s", tern_strerror(-e));
        return -e;
    }
    l->started = true;
    /* the checker runs once zones are loaded and health checking is on */
    health_follow(l, l->cfg_last);
    for (size_t i = 0; i < l->nsrc; i++)
        if (l->src[i]->ops->start)
            l->src[i]->ops->start(l->src[i]);
    return 0;
}

void loader_request(loader_t *l)
{
    pthread_mutex_lock(&l->mu);
    l->requested++;
    pthread_cond_signal(&l->wake);
    pthread_mutex_unlock(&l->mu);
}

bool loader_reload_wait(loader_t *l, loader_stats_t *stats)
{
    pthread_mutex_lock(&l->mu);
    uint64_t mine = ++l->requested;
    pthread_cond_signal(&l->wake);
    while (l->finished < mine && !l->stop)
        pthread_cond_wait(&l->done, &l->mu);
    bool ok = l->finished >= mine && l->stats.last_ok;
    if (stats)
        *stats = l->stats;
    pthread_mutex_unlock(&l->mu);
    return ok;
}

size_t loader_zones(loader_t *l, loader_zone_fn fn, void *ctx)
{
    pthread_mutex_lock(&l->mu);
    const struct snapshot *s = l->cur;
    size_t n = s ? s->nz : 0;
    for (size_t i = 0; i < n; i++) {
        const struct zent *e = &s->z[i];
        loader_zone_info_t info = {
            .origin = e->key,
            .file = e->file,
            .serial = e->zone->serial,
            .records = e->zone->rr_count,
            .bytes = arena_footprint(e->zone->arena),
            .loaded = e->loaded,
            .version = e->version,
            .dnssec = e->zone->dnssec,
        };
        fn(ctx, &info);
    }
    pthread_mutex_unlock(&l->mu);
    return n;
}

void loader_get_stats(loader_t *l, loader_stats_t *out)
{
    zone_source_t *redis = source_named(l, "redis");
    pthread_mutex_lock(&l->mu);
    *out = l->stats;
    for (size_t i = 0; i < l->nsrc; i++)
        if (l->src[i] == redis)
            out->redis_publishes = l->src_publishes[i];
    pthread_mutex_unlock(&l->mu);
    redis_source_stats_t st;
    out->redis_enabled = redis && source_redis_get_stats(redis, &st);
    if (out->redis_enabled) {
        out->redis_connected = st.connected;
        out->redis_zones = st.zones;
        out->redis_failed = st.failed;
        out->redis_zones_skipped = st.zones_skipped;
        out->redis_labels_skipped = st.labels_skipped;
        out->redis_over_value_bytes = st.over_value_bytes;
        out->redis_over_labels = st.over_labels;
        out->redis_over_rrset_records = st.over_rrset_records;
    }
}

void loader_stop(loader_t *l)
{
    if (!l)
        return;
    /* The loader thread first: a reload in progress may be stopping, starting or resyncing a
     * source (sources_configure()), so stopping the source under it would free what it is using,
     * or race it to stop the source twice and leave one it started after the stop. */
    if (l->started) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_cond_broadcast(&l->wake);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
        l->started = false;
    }
    /* Then the sources, from here alone. Until they are joined their threads only queue changes
     * under l->mu (nobody applies them any more); loader_free() frees what they left. */
    for (size_t i = 0; i < l->nsrc; i++)
        if (l->src[i]->ops->stop)
            l->src[i]->ops->stop(l->src[i]);
    /* the checker last: a reload no longer configures or starts it */
    health_checker_free(l->checker);
    l->checker = NULL;
    l->checker_started = false;
}

void loader_free(loader_t *l)
{
    if (!l)
        return;
    loader_stop(l);
    for (size_t i = 0; i < l->nchg; i++)
        zone_change_clear(&l->chg[i]);
    free(l->chg);
    geo_ref_put(l->sgeo_v4);
    geo_ref_put(l->sgeo_v6);
    snapshot_free(l->cur); /* its zones drop their endpoints */
    for (size_t i = 0; i < l->nsrc; i++)
        l->src[i]->ops->free(l->src[i]); /* their zones drop their endpoints */
    free(l->src);
    free(l->src_publishes);
    free(l->poked);
    free(l->touched);
    limit_shared_free(l->limits); /* after every view that used it */
    health_registry_free(l->health);
    if (l->cfg_last && l->cfg_last != l->cfg0) {
        config_free(l->cfg_last);
        free(l->cfg_last);
    }
    if (l->cfg0) {
        config_free(l->cfg0);
        free(l->cfg0);
    }
    pthread_mutex_destroy(&l->geo_mu);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->wake);
    pthread_cond_destroy(&l->done);
    free(l);
}

health_registry_t *loader_health(loader_t *l)
{
    return l->health;
}

bool loader_health_stats(loader_t *l, health_checker_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    /* the checker is freed only by loader_stop(), after the control and metrics threads stop */
    if (!l->checker)
        return false;
    health_checker_stats(l->checker, out);
    return true;
}

bool loader_aname_stats(loader_t *l, aname_stats_t *out)
{
    zone_source_t *a = source_named(l, "aname");
    if (a)
        return source_aname_stats(a, out);
    memset(out, 0, sizeof(*out));
    return false;
}

int loader_aname_ready_fd(loader_t *l)
{
    zone_source_t *a = source_named(l, "aname");
    return a ? source_aname_ready_fd(a) : -1;
}

void loader_aname_log_pending(loader_t *l)
{
    zone_source_t *a = source_named(l, "aname");
    if (a)
        source_aname_log_pending(a);
}

limit_shared_t *loader_limits(loader_t *l)
{
    return l->limits;
}
