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
#include "tern/checker/health_check.h"
#include "tern/redis/redis_source.h"
#include "tern/xfr/journal.h"
#include "tern/xfr/xfr.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_json.h"
#include "tern/zone/zone_patch.h"
#include "tern/load/aname_resolver.h"
#include "tern/zone/aname_results.h"
#include "tern/zone/zone_table.h"

#include "health_index.h"
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
    char *key;  /* origin_key(): what "the same zone" means */
    char *file; /* the path as configured; for a Redis zone, where it came from */
    config_zone_format_t format;
    bool redis; /* from the Redis source, not from the configuration */
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

    /* The Redis source (redis_source.h): its callbacks queue zones in pend (under mu) and
     * wake the loader thread, which applies them to rz and publishes. */
    config_t *cfg_last; /* the config of the last published build (file zones, geo, redis) */
    redis_source_t *redis;
    config_redis_t redis_cfg; /* what the running source was started with */
    struct rpend {
        char *key;
        zone_t *zone;   /* NULL: the zone is gone */
        uint8_t *names; /* a patch (on_patch): zone holds only these nnames names, back to back */
        size_t nnames;
    } * pend;
    size_t npend, cappend;
    bool redis_dirty;  /* pend holds something (under mu) */
    bool redis_synced; /* the source finished its first read (under mu) */
    struct rzone {
        char *key;
        zone_t *zone; /* the loader's own reference */
        uint64_t version;
        int64_t loaded;
        bool conflict_logged;
    } * rz; /* Redis zones being served, loader thread only */
    size_t nrz, caprz;
    /* The geo databases the source locates records with (its locate callback runs on its
     * own thread): the current snapshot's, swapped under geo_mu when they change. */
    pthread_mutex_t geo_mu;
    pthread_mutex_t rs_mu; /* guards the redis pointer against loader_get_stats(); the source's
                              callbacks never take it */
    struct geo_ref *rgeo_v4, *rgeo_v6;
    geoip_set_t rgeo;

    /* Health checks (tern/health/health.h): every zone's endpoints live in one registry; the
     * checker probes them once health checking is enabled. The Redis source's builds find
     * ternd.yaml's checks by address through rhidx, swapped under health_mu after a reload. */
    health_registry_t *health;
    health_checker_t *checker;
    bool checker_started;
    pthread_mutex_t health_mu;
    health_index_t *rhidx;
    bool redis_health; /* the source was started with health checks on */

    /* Flood resistance (tern/limit/limit.h): the state shared by every view and worker (rate
     * tables, TCP counts, cookie secrets), made with the first config; each view has its own
     * immutable policy built from its config. */
    limit_shared_t *limits;

    /* ANAME targets outside the served zones (tern/load/aname_resolver.h): the resolver thread
     * is made once some zone has one; its results arrive in aname_next (under mu) and are
     * published with the zones of the current view (aname_cur: the loader thread's). */
    aname_resolver_t *aname;
    bool aname_started;
    aname_results_t *aname_cur;
    aname_results_t *aname_next;
    bool aname_dirty;
    /* readable once a complete first round is in the published view (main holds READY for it);
     * made with the resolver, -1 before */
    int aname_ready_fd;
    bool aname_ready_told;
    size_t aname_warned; /* exits last warned about for want of an upstream */

    /* Zone transfers (tern/xfr/xfr.h): the service main made, or NULL. Secondary zones'
     * versions arrive from its thread in spend (under mu) and are served from sec (the
     * loader thread's): the last transferred version, the on-disk copy read at startup, or an
     * unavailable placeholder (SERVFAIL) until the first transfer. */
    xfr_t *xfr;
    struct szone {
        char *key;
        zone_t *zone; /* the loader's own reference */
        uint64_t version;
        int64_t loaded;
    } * sec;
    size_t nsec, capsec;
    struct spend {
        char *key;
        zone_t *zone; /* NULL: expired */
    } * spend;
    size_t nspend, capspend;
    bool sec_dirty; /* spend holds something (under mu) */
};

/* The canonical key of a zone origin (dname_key(): escapes resolved, lowercased, no final dot,
 * "." for the root), malloc'd; the one meaning of "the same zone" for file and Redis zones alike.
 * NULL when out of memory or the origin does not parse (config and the Redis source have already
 * refused such names). */
static char *origin_key(const char *origin)
{
    char key[DNAME_KEY_MAX];
    const char *why;
    if (dname_key(origin, key, sizeof(key), &why) < 0)
        return NULL;
    return strdup(key);
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

/* Zone reads so far, across loaders (a process has one); a zone's version is its read's number. */
static uint64_t zone_reads;

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
    if (!e || e->redis || strcmp(e->file, file) != 0 || e->format != format ||
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
    if (!old || old->redis || !old->zone || old->zone->dnssec || old->zone->unavailable ||
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

/*
 * Build a complete snapshot for cfg, sharing the unchanged zones of old (may be NULL).
 * 0 with *out, or a negative code with the message in err.
 */
/* ---- secondary zones (tern/xfr) ------------------------------------------------------------ */

/* Loader thread: the entry of secondary zone key, made on first sight from the on-disk copy
 * (cz->file, when it exists and loads) or an unavailable placeholder. NULL: out of memory. */
static struct szone *sec_get(loader_t *l, const char *key, const config_zone_t *cz)
{
    for (size_t i = 0; i < l->nsec; i++)
        if (strcmp(l->sec[i].key, key) == 0)
            return &l->sec[i];
    if (tern_grow((void **)&l->sec, &l->capsec, l->nsec + 1, sizeof(*l->sec)) < 0)
        return NULL;
    zone_t *z = NULL;
    if (cz && cz->file && access(cz->file, F_OK) == 0) {
        char err[1024];
        if (zone_file_load(cz->origin, cz->file, &z, err, sizeof(err)) < 0) {
            log_warn("xfr: zone %s: its copy cannot be read (%s); waiting for a transfer", key,
                     err);
            z = NULL;
        } else {
            log_info("xfr: zone %s: serving its copy %s (serial %u) until the primary is asked",
                     key, cz->file, z->serial);
        }
    }
    if (!z) {
        uint8_t apex[DNAME_MAXLEN];
        const char *why;
        if (dname_from_str(key, strlen(key), false, apex, &why) < 0 ||
            !(z = zone_new_unavailable(apex, "secondary zone (no transfer yet)")))
            return NULL;
    }
    char *k = strdup(key);
    if (!k) {
        zone_free(z);
        return NULL;
    }
    struct szone *sz = &l->sec[l->nsec++];
    *sz = (struct szone){.key = k,
                         .zone = z,
                         .version = __atomic_add_fetch(&zone_reads, 1, __ATOMIC_RELAXED),
                         .loaded = (int64_t)time(NULL)};
    return sz;
}

/* build(): secondary zone cz into s. */
static int add_secondary(loader_t *l, struct snapshot *s, const old_index_t *ix,
                         const config_zone_t *cz, size_t *changed, char *err, size_t errlen)
{
    struct zent *e = &s->z[s->nz++];
    if (!(e->key = origin_key(cz->origin)) || !(e->file = strdup(cz->file ? cz->file : "")) ||
        !(e->signing = strdup(""))) {
        snprintf(err, errlen, "out of memory");
        return TERN_ENOMEM;
    }
    struct szone *sz = sec_get(l, e->key, cz);
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

static int build(loader_t *l, const struct snapshot *old, const config_t *cfg, bool quick,
                 struct snapshot **out, size_t *changed, char *err, size_t errlen)
{
    int rc = TERN_ENOMEM;
    health_index_t *hx = NULL;
    *out = NULL;
    *changed = 0;
    err[0] = '\0';
    old_index_t ix;
    if (old_index_init(&ix, old) < 0) {
        snprintf(err, errlen, "out of memory");
        return TERN_ENOMEM;
    }
    struct snapshot *s = calloc(1, sizeof(*s));
    if (!s || !(s->table = zone_table_new()) ||
        !(s->z = calloc(cfg->nzones + l->nrz + 1, sizeof(*s->z))))
        goto nomem;
    if ((cfg->identity && !(s->identity = strdup(cfg->identity))) ||
        (cfg->version && !(s->version = strdup(cfg->version))))
        goto nomem;

    /* The geo databases first: JSON zones locate their records with them at load time, so a
     * changed database also rebuilds every JSON zone. */
    bool geo_changed = (old && old->geo_v4) != (cfg->geoip_db != NULL) ||
                       (old && old->geo_v6) != (cfg->geoip_db_v6 != NULL);
    if (cfg->geoip_db && (rc = geo_ref_get(old ? old->geo_v4 : NULL, cfg->geoip_db, "geoip_db",
                                           quick, &s->geo_v4, &geo_changed, err, errlen)) < 0)
        goto fail;
    if (cfg->geoip_db_v6 &&
        (rc = geo_ref_get(old ? old->geo_v6 : NULL, cfg->geoip_db_v6, "geoip_db_v6", quick,
                          &s->geo_v6, &geo_changed, err, errlen)) < 0)
        goto fail;
    if (s->geo_v6 && geoip_ip_version(s->geo_v6->db) != 6) {
        snprintf(err, errlen, "geoip_db_v6: %s is an IPv4 database (ip_version 4)",
                 cfg->geoip_db_v6);
        rc = TERN_EINVAL;
        goto fail;
    }
    s->view.geoip.v4 = s->geo_v4 ? s->geo_v4->db : NULL;
    s->view.geoip.v6 = s->geo_v6                                           ? s->geo_v6->db
                       : s->geo_v4 && geoip_ip_version(s->geo_v4->db) == 6 ? s->geo_v4->db
                                                                           : NULL;
    /* Health checks by address: every zone is built again when they change (or when health
     * checking is turned on or off), so its records point at the right endpoints. */
    bool nomem_hx;
    hx = health_index_new(l->health, &cfg->health, &nomem_hx);
    if (nomem_hx)
        goto nomem;
    bool health_changed = old && !config_same_health_checks(&l->cfg_last->health, &cfg->health);
    const zone_json_opts_t jopts = {
        .locate = s->view.geoip.v4 || s->view.geoip.v6 ? locate : NULL,
        .locate_ctx = &s->view.geoip,
        .health = cfg->health.enabled ? l->health : NULL,
        .health_fn = hx ? health_index_lookup : NULL,
        .health_ctx = hx,
    };

    for (size_t i = 0; i < cfg->nzones; i++) {
        const config_zone_t *cz = &cfg->zones[i];
        if (!cz->file && !cz->nprimaries)
            continue; /* transfer settings of a zone from Redis (tern/xfr) */
        if (cz->nprimaries) {
            if ((rc = add_secondary(l, s, &ix, cz, changed, err, errlen)) < 0)
                goto fail;
            continue;
        }
        struct zent *e = &s->z[s->nz++];
        if (!(e->key = origin_key(cz->origin)) || !(e->file = strdup(cz->file)) ||
            !(e->signing = zone_sign_ident(cz, cfg)))
            goto nomem;
        e->format = cz->format;
        const struct zent *prev = reusable(&ix, e->key, e->file, e->format, e->signing, quick);
        if (prev && ((cz->format == CONFIG_ZONE_JSON && geo_changed) || health_changed))
            prev = NULL;
        zone_t *z = NULL;
        if (prev) {
            if (copy_deps(e, prev) < 0)
                goto nomem;
            z = zone_retain(prev->zone);
            e->loaded = prev->loaded;
            e->version = prev->version;
        } else {
            /* a signed zone: its keys first (the builder adds their DNSKEYs), its signatures
             * once it is built */
            dnssec_zone_t *dz = NULL;
            uint8_t dnskeys[ZONE_SIGN_DNSKEYS_MAX];
            size_t dnskeys_len = 0;
            if (cz->ndnssec_keys && (rc = zone_sign_prepare(cz, cfg, dep_add, e, &dz, dnskeys,
                                                            &dnskeys_len, err, errlen)) < 0)
                goto fail;
            const struct zent *base = dz ? NULL : patch_base(&ix, e, cz, health_changed);
            int prc = 2; /* 0: patched, 1: the same data, 2: read in full */
            if (base) {
                const zone_file_opts_t fo = {.seen = dep_add,
                                             .seen_ctx = e,
                                             .health = hx ? health_index_lookup : NULL,
                                             .health_ctx = hx};
                char why[512];
                prc = zone_file_patch(cz->origin, cz->file, &fo, base->zone, &z, why, sizeof(why));
                if (prc < 0) {
                    rc = prc;
                    snprintf(err, errlen, "%s", why);
                    goto fail;
                }
                if (prc == 0)
                    log_info("zone %s: %s: %zu names changed, patched (%u patches since its "
                             "last full read)",
                             cz->origin, cz->file, z->patched - base->zone->patched, z->patches);
                if (prc == 2) {
                    log_info("zone %s: %s: reading it in full (%s)", cz->origin, cz->file, why);
                    deps_clear(e);
                }
            }
            if (prc == 1) {
                /* the file was touched, its records are the served ones: nothing to publish */
                z = zone_retain(base->zone);
                e->loaded = base->loaded;
                e->version = base->version;
            } else if (prc == 0) {
                /* a new version, counted below like a full read */
            } else if (cz->format == CONFIG_ZONE_JSON) {
                struct stat st;
                zone_json_opts_t zo = jopts;
                zo.dnskeys = dz ? dnskeys : NULL;
                zo.dnskeys_len = dnskeys_len;
                if (stat(cz->file, &st) < 0) {
                    rc = -errno;
                    snprintf(err, errlen, "%s: %s", cz->file, strerror(-rc));
                } else if (dep_add(e, cz->file, &st) < 0) {
                    dnssec_zone_free(dz);
                    goto nomem;
                } else {
                    rc = zone_json_load_file(cz->origin, cz->file, &zo, &z, err, errlen);
                }
            } else {
                const zone_file_opts_t fo = {.seen = dep_add,
                                             .seen_ctx = e,
                                             .health = hx ? health_index_lookup : NULL,
                                             .health_ctx = hx,
                                             .dnskeys = dz ? dnskeys : NULL,
                                             .dnskeys_len = dnskeys_len};
                rc = zone_file_load_opts(cz->origin, cz->file, &fo, &z, err, errlen);
            }
            if (prc != 2)
                rc = 0;
            else if (rc >= 0 && dz)
                rc = zone_sign_attach(z, dz, err, errlen); /* frees dz on failure */
            else if (dz)
                dnssec_zone_free(dz);
            if (rc < 0) {
                if (dz && z)
                    zone_free(z);
                if (!err[0])
                    snprintf(err, errlen, "%s: %s", cz->file, tern_strerror(rc));
                goto fail;
            }
            if (prc != 1) {
                (*changed)++;
                e->loaded = (int64_t)time(NULL);
                e->fresh = true;
                e->version = __atomic_add_fetch(&zone_reads, 1, __ATOMIC_RELAXED);
            }
        }
        e->zone = z;
        s->records += z->rr_count;
        s->bytes += zone_footprint(z);
        rc = zone_table_add(s->table, z);
        if (rc < 0) {
            zone_free(z);
            if (rc == TERN_EDUPZONE)
                snprintf(err, errlen, "zone %s (%s) is configured twice", cz->origin, cz->file);
            else
                snprintf(err, errlen, "zone %s: %s", cz->origin, tern_strerror(rc));
            goto fail;
        }
    }
    /* Redis zones after the configured ones; a configured zone of the same name wins. The file
     * zones are indexed once, so 10,000 zones of each are matched in linear time. */
    old_index_t files;
    if (l->nrz && old_index_init(&files, s) < 0)
        goto nomem;
    for (size_t i = 0; i < l->nrz; i++) {
        struct rzone *r = &l->rz[i];
        if (find_key(&files, r->key)) {
            if (!r->conflict_logged)
                log_err("redis: zone %s is also configured from a file; serving the file", r->key);
            r->conflict_logged = true;
            continue;
        }
        struct zent *e = &s->z[s->nz++];
        if (!(e->key = strdup(r->key)) || !(e->file = strdup(r->zone->source))) {
            free(files.slot);
            goto nomem;
        }
        e->redis = true;
        e->format = CONFIG_ZONE_JSON;
        e->loaded = r->loaded;
        e->version = r->version;
        const struct zent *prev = find_key(&ix, r->key);
        e->fresh = !prev || !prev->redis || prev->version != r->version;
        if (e->fresh)
            (*changed)++;
        e->zone = zone_retain(r->zone);
        if ((rc = zone_table_add(s->table, e->zone)) < 0) {
            zone_free(e->zone);
            e->zone = NULL;
            if (rc == TERN_EDUPZONE) {
                /* Keys are canonical, so this is a second Redis entry for a zone already in the
                 * table: skipped, never a reason to fail the file zones' reload. */
                if (!r->conflict_logged)
                    log_err("redis: zone %s is in the set twice; serving the first", r->key);
                r->conflict_logged = true;
                if (e->fresh)
                    (*changed)--;
                zent_clear(e);
                memset(e, 0, sizeof(*e));
                s->nz--;
                continue;
            }
            free(files.slot);
            snprintf(err, errlen, "redis zone %s: %s", r->key, tern_strerror(rc));
            goto fail;
        }
        s->records += r->zone->rr_count;
        s->bytes += zone_footprint(r->zone);
    }
    if (l->nrz)
        free(files.slot);
    if ((cfg->asn_table || cfg->asn_db) &&
        (rc = asn_ref_get(old ? old->asn : NULL, cfg, quick, &s->asn, err, errlen)) < 0)
        goto fail;
    if (zone_table_freeze(s->table) < 0)
        goto nomem;
    s->view.table = s->table;
    s->view.asn = s->asn ? s->asn->t : NULL;
    /* The workers cache geo lookups per view generation: a new one only when a database
     * changed, so Redis publishes and zone reloads keep the caches warm. */
    if (old && old->asn == s->asn && old->geo_v4 == s->geo_v4 && old->geo_v6 == s->geo_v6)
        s->view.gen = old->view.gen;
    else
        s->view.gen = __atomic_add_fetch(&view_gens, 1, __ATOMIC_RELAXED);
    int lrc = 0;
    s->limit = l->limits ? config_limit_new(l->limits, cfg, &lrc) : NULL;
    if (lrc < 0) {
        snprintf(err, errlen, "limits: %s", tern_strerror(lrc));
        rc = lrc;
        goto fail;
    }
    s->view.limit = s->limit;
    s->aname = l->aname_cur ? aname_results_retain(l->aname_cur) : NULL;
    s->view.aname = s->aname;
    for (size_t i = 0; i < s->nz && !s->view.dnssec; i++)
        s->view.dnssec = s->z[i].zone && s->z[i].zone->dnssec;
    s->view.cfg.edns_max_udp = cfg->edns_max_udp;
    s->view.cfg.xfr = l->xfr && xfr_wanted(cfg);
    s->view.cfg.identity = s->identity;
    s->view.cfg.version = s->version;
    free(ix.slot);
    health_index_free(hx);
    *out = s;
    return 0;
nomem:
    rc = TERN_ENOMEM;
    snprintf(err, errlen, "out of memory");
fail:
    free(ix.slot);
    health_index_free(hx);
    snapshot_free(s);
    return rc;
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
        if (!e->fresh || e->redis)
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
        if (old->z[i].redis || find_key(&in_new, old->z[i].key))
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

/* Publish s and free what it replaces once no worker can still see it. */
static void aname_sync(loader_t *l, const struct snapshot *s);

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
    aname_sync(l, s);
}

/* ---- ANAME targets outside our zones ------------------------------------------------------ */

/* Resolver thread: new results; the loader thread publishes them (loader_main()). */
static void aname_arrived(void *ctx, aname_results_t *res)
{
    loader_t *l = ctx;
    pthread_mutex_lock(&l->mu);
    aname_results_t *old = l->aname_next;
    l->aname_next = res;
    l->aname_dirty = true;
    pthread_cond_signal(&l->wake);
    pthread_mutex_unlock(&l->mu);
    aname_results_release(old);
}

/* cfg's upstreams to the resolver (a reload may change them). */
static void aname_configure(loader_t *l, const config_t *cfg)
{
    if (!l->aname || !cfg)
        return;
    aname_upstream_t ups[CONFIG_MAX_UPSTREAMS];
    size_t n =
        cfg->aname.nupstreams < CONFIG_MAX_UPSTREAMS ? cfg->aname.nupstreams : CONFIG_MAX_UPSTREAMS;
    for (size_t i = 0; i < n; i++) {
        const config_upstream_t *u = &cfg->aname.upstreams[i];
        memset(&ups[i], 0, sizeof(ups[i]));
        snprintf(ups[i].host, sizeof(ups[i].host), "%s", u->host ? u->host : "");
        ups[i].port = u->port;
        ups[i].tcp = u->tcp;
        ups[i].timeout_ms = u->timeout_ms;
    }
    if (aname_resolver_configure(l->aname, ups, n) < 0)
        log_err("aname: out of memory; the resolver keeps its previous upstreams");
    char def[4096];
    if (aname_resolver_set_state(l->aname, config_aname_state_file(&cfg->aname, def, sizeof(def)),
                                 cfg->aname.max_stale_s) < 0)
        log_err("aname: out of memory; the resolver keeps its previous state file");
}

static void aname_start(loader_t *l)
{
    if (l->aname && !l->aname_started && l->started)
        l->aname_started = aname_resolver_start(l->aname) == 0;
}

/* Every name where an ANAME's A or AAAA leaves the zones of s (answer_aname_exit()), to the
 * resolver: made the first time there is one, told the whole set after every publish. */
static void aname_sync(loader_t *l, const struct snapshot *s)
{
    /* the names back to back, then a pointer to each (the buffer moves while it grows) */
    uint8_t *names = NULL;
    const uint8_t **list = NULL;
    size_t n = 0, len = 0, lcap = 0;
    bool nomem = false;
    for (size_t i = 0; i < s->nz && !nomem; i++) {
        const zone_t *z = s->z[i].zone;
        if (!z || !z->aname_count)
            continue;
        for (size_t k = 0; k < z->node_count && !nomem; k++) {
            const zone_rrset_t *an = zone_node_rrset(zone_node_at(z, (uint32_t)k), WIRE_T_ANAME);
            if (!an)
                continue;
            static const uint16_t types[] = {WIRE_T_A, WIRE_T_AAAA};
            for (size_t t = 0; t < 2 && !nomem; t++) {
                uint8_t out[DNAME_MAXLEN];
                if (!answer_aname_exit(s->table, an->rdata + 2, types[t], out))
                    continue;
                size_t ol = dname_len(out);
                if (tern_grow((void **)&names, &lcap, len + ol, 1) < 0) {
                    nomem = true;
                    break;
                }
                memcpy(names + len, out, ol);
                len += ol;
                n++;
            }
        }
    }
    if (!nomem && n && !(list = malloc(n * sizeof(*list))))
        nomem = true;
    for (size_t i = 0, off = 0; !nomem && i < n; i++, off += dname_len(names + off))
        list[i] = names + off;
    if (nomem) {
        log_err("aname: out of memory; the resolver keeps its previous targets");
    } else if (n || l->aname) {
        aname_resolver_t *made = NULL;
        if (!l->aname && (made = aname_resolver_new(aname_arrived, l)) != NULL) {
            l->aname_ready_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
            __atomic_store_n(&l->aname, made, __ATOMIC_RELEASE); /* loader_aname_stats() */
        }
        if (!l->aname) {
            log_err("aname: out of memory; targets outside the served zones are not resolved");
        } else {
            if (!l->aname_started)
                aname_configure(l, l->cfg_last);
            if (aname_resolver_set_targets(l->aname, list, n) < 0)
                log_err("aname: out of memory; the resolver keeps its previous targets");
            aname_start(l);
        }
        if (n && l->cfg_last && l->cfg_last->aname.nupstreams == 0 && n != l->aname_warned) {
            char nm[DNAME_MAXLEN * 4 + 1];
            (void)dname_to_str(list[0], nm, sizeof(nm));
            log_warn("aname: %zu ANAME targets (such as %s) are outside the served zones and no "
                     "upstream is configured (aname.upstreams): A and AAAA at their owners "
                     "answer SERVFAIL",
                     n, nm);
        }
        l->aname_warned = n && l->cfg_last && !l->cfg_last->aname.nupstreams ? n : 0;
    }
    free(list);
    free(names);
}

/* The resolver's latest results, published with the current zones. */
static void aname_publish(loader_t *l)
{
    pthread_mutex_lock(&l->mu);
    aname_results_t *res = l->aname_next;
    l->aname_next = NULL;
    l->aname_dirty = false;
    pthread_mutex_unlock(&l->mu);
    if (!res)
        return;
    aname_results_release(l->aname_cur);
    l->aname_cur = res;
    if (!l->cfg_last || !l->cur)
        return;
    char err[1024] = "";
    struct snapshot *s;
    size_t changed;
    if (build(l, l->cur, l->cfg_last, true, &s, &changed, err, sizeof(err)) < 0) {
        log_err("aname: cannot publish new results: %s; still serving the previous ones", err);
        return;
    }
    publish(l, s);
    if (aname_results_complete(res) && !l->aname_ready_told && l->aname_ready_fd >= 0) {
        uint64_t one = 1;
        l->aname_ready_told = write(l->aname_ready_fd, &one, sizeof(one)) == sizeof(one);
    }
}

/* ---- the Redis source ------------------------------------------------------------------ */

static bool redis_wait_first(loader_t *l);

static void redis_cfg_free(config_redis_t *c)
{
    free(c->host);
    free(c->unix_path);
    free(c->password);
    free(c->prefix);
    free(c->suffix);
    free(c->changes_channel);
    for (size_t i = 0; i < c->nsentinels; i++)
        free(c->sentinels[i]);
    free(c->sentinels);
    free(c->sentinel_master);
    free(c->sentinel_password);
    memset(c, 0, sizeof(*c));
}

/* A deep copy, for comparing a reload's settings with the running source's. */
static int redis_cfg_copy(config_redis_t *dst, const config_redis_t *src)
{
    *dst = *src;
    dst->host = dst->unix_path = dst->password = dst->prefix = dst->suffix = dst->changes_channel =
        NULL;
    dst->sentinel_master = dst->sentinel_password = NULL;
    dst->sentinels = NULL;
    dst->nsentinels = 0;
    if (src->nsentinels && !(dst->sentinels = calloc(src->nsentinels, sizeof(*dst->sentinels)))) {
        redis_cfg_free(dst);
        return TERN_ENOMEM;
    }
    for (; dst->nsentinels < src->nsentinels; dst->nsentinels++) {
        if (!(dst->sentinels[dst->nsentinels] = strdup(src->sentinels[dst->nsentinels]))) {
            redis_cfg_free(dst);
            return TERN_ENOMEM;
        }
    }
    if ((src->sentinel_master && !(dst->sentinel_master = strdup(src->sentinel_master))) ||
        (src->sentinel_password && !(dst->sentinel_password = strdup(src->sentinel_password))) ||
        (src->host && !(dst->host = strdup(src->host))) ||
        (src->unix_path && !(dst->unix_path = strdup(src->unix_path))) ||
        (src->password && !(dst->password = strdup(src->password))) ||
        (src->prefix && !(dst->prefix = strdup(src->prefix))) ||
        (src->suffix && !(dst->suffix = strdup(src->suffix))) ||
        (src->changes_channel && !(dst->changes_channel = strdup(src->changes_channel)))) {
        redis_cfg_free(dst);
        return TERN_ENOMEM;
    }
    return 0;
}

/* Source thread: queue a zone version (or its removal) for the loader thread. */
static void redis_queue(loader_t *l, const char *origin, zone_t *z, uint8_t *names, size_t nnames)
{
    char *key = origin_key(origin);
    pthread_mutex_lock(&l->mu);
    if (!key || tern_grow((void **)&l->pend, &l->cappend, l->npend + 1, sizeof(*l->pend)) < 0) {
        pthread_mutex_unlock(&l->mu);
        char esc[TERN_ESCAPE_MAX(64)]; /* a key already (log-safe), but never trust a caller */
        log_err("redis: zone %s: out of memory; change dropped (the next resync retries)",
                tern_escape(esc, sizeof(esc), origin, strlen(origin)));
        free(key);
        free(names);
        zone_free(z);
        return;
    }
    l->pend[l->npend++] = (struct rpend){.key = key, .zone = z, .names = names, .nnames = nnames};
    l->redis_dirty = true;
    pthread_cond_signal(&l->wake);
    pthread_mutex_unlock(&l->mu);
}

static void redis_on_zone(void *ctx, const char *origin, zone_t *z)
{
    redis_queue(ctx, origin, z, NULL, 0);
}

static void redis_on_gone(void *ctx, const char *origin)
{
    redis_queue(ctx, origin, NULL, NULL, 0);
}

/* Source thread: labels named on the change channel, to patch into the zone (redis_apply()). */
static void redis_on_patch(void *ctx, const char *origin, zone_t *fresh,
                           const uint8_t *const *names, size_t n)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += dname_len(names[i]);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) {
        /* the zone served keeps its old data until the next verify finds the change */
        log_err("redis: zone %s: out of memory; a change waits for the next verify", origin);
        zone_free(fresh);
        return;
    }
    len = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = dname_len(names[i]);
        memcpy(buf + len, names[i], k);
        len += k;
    }
    redis_queue(ctx, origin, fresh, buf, n);
}

static void redis_on_state(void *ctx, bool up)
{
    (void)ctx;
    if (up)
        log_info("redis: connected");
    else
        log_warn("redis: connection lost; serving the last zones read, reconnecting");
}

static void redis_on_synced(void *ctx, size_t zones, size_t failed)
{
    loader_t *l = ctx;
    pthread_mutex_lock(&l->mu);
    bool first = !l->redis_synced;
    l->redis_synced = true;
    pthread_cond_broadcast(&l->done);
    pthread_mutex_unlock(&l->mu);
    if (first || failed)
        log_info("redis: %zu zones in the set, %zu rejected", zones, failed);
}

/* Source thread: locate a record's address through the current geo databases. */
static bool redis_locate(void *ctx, int family, const uint8_t *addr, double *lat, double *lon)
{
    loader_t *l = ctx;
    pthread_mutex_lock(&l->geo_mu);
    bool ok = (l->rgeo.v4 || l->rgeo.v6) && locate(&l->rgeo, family, addr, lat, lon);
    pthread_mutex_unlock(&l->geo_mu);
    return ok;
}

/* Source thread: the endpoint of a Redis zone's record by ternd.yaml's checks. */
static health_ep_t *redis_health(void *ctx, const uint8_t *owner, uint16_t type,
                                 const uint8_t *addr)
{
    loader_t *l = ctx;
    pthread_mutex_lock(&l->health_mu);
    health_ep_t *ep = health_index_lookup(l->rhidx, owner, type, addr);
    pthread_mutex_unlock(&l->health_mu);
    return ep;
}

/* Loader thread: the checks by address Redis zones are built with, from cfg. */
static int redis_set_health(loader_t *l, const config_t *cfg)
{
    bool nomem;
    health_index_t *x = health_index_new(l->health, &cfg->health, &nomem);
    if (nomem)
        return TERN_ENOMEM;
    pthread_mutex_lock(&l->health_mu);
    health_index_t *old = l->rhidx;
    l->rhidx = x;
    pthread_mutex_unlock(&l->health_mu);
    health_index_free(old);
    return 0;
}

/* Loader thread: point the source's locate callback at snapshot s's databases. True when they
 * differ from the ones it used (Redis zones then need their records located again). */
static bool redis_set_geo(loader_t *l, const struct snapshot *s)
{
    struct geo_ref *v4 = s->geo_v4, *v6 = s->geo_v6;
    if (v4 == l->rgeo_v4 && v6 == l->rgeo_v6)
        return false;
    if (v4)
        v4->refs++;
    if (v6)
        v6->refs++;
    pthread_mutex_lock(&l->geo_mu);
    struct geo_ref *o4 = l->rgeo_v4, *o6 = l->rgeo_v6;
    l->rgeo_v4 = v4;
    l->rgeo_v6 = v6;
    l->rgeo = s->view.geoip;
    pthread_mutex_unlock(&l->geo_mu);
    geo_ref_put(o4);
    geo_ref_put(o6);
    return true;
}

/* rz's index for redis_apply(): open addressing over key hashes, slot = index + 1, 0 = empty. */
static uint32_t *rz_index(const loader_t *l, size_t extra, size_t *mask)
{
    size_t n = 16;
    while (n < 2 * (l->nrz + extra))
        n *= 2;
    uint32_t *slot = calloc(n, sizeof(*slot));
    if (!slot)
        return NULL;
    *mask = n - 1;
    for (size_t i = 0; i < l->nrz; i++) {
        size_t j = tern_hash_str(l->rz[i].key) & *mask;
        while (slot[j])
            j = (j + 1) & *mask;
        slot[j] = (uint32_t)i + 1;
    }
    return slot;
}

/* Loader thread: move the queued versions into rz. Returns how many changes were applied. */
/* A Redis zone that secondaries follow (transfer settings, tern/xfr) needs a serial above the
 * one they have, or they never take the change: redins' writers rarely touch soa.serial. So a
 * new version whose serial is not above the last one served gets max(last + 1, now) (now as a
 * Unix time, as Knot's serial-policy unixtime, so serials keep rising across restarts); a zone
 * read for the first time gets now when its own serial is below it (secondaries may hold a
 * raised one from before a restart). Signed zones keep theirs (their SOA is signed): logged. */
static void redis_raise_serial(loader_t *l, const char *key, bool had, uint32_t last, zone_t *z)
{
    if (!l->xfr || !xfr_zone_wanted(l->xfr, key))
        return;
    uint32_t now = (uint32_t)time(NULL), want;
    if (had) {
        if (xfr_serial_lt(last, z->serial))
            return;
        want = xfr_serial_lt(last, now) ? now : last + 1;
    } else {
        if (!xfr_serial_lt(z->serial, now))
            return;
        want = now;
    }
    if (z->dnssec) {
        log_warn("redis: zone %s changed without a higher serial (%u); it is signed, so its "
                 "secondaries keep the old data until soa.serial rises",
                 key, z->serial);
        return;
    }
    uint32_t was = z->serial;
    if (zone_set_serial(z, want) < 0)
        log_err("redis: zone %s: out of memory raising its serial", key);
    else if (had)
        log_info("redis: zone %s: serial %u -> %u (raised above %u for its secondaries)", key, was,
                 want, last);
    else
        log_info("redis: zone %s: serial %u -> %u (raised for its secondaries)", key, was, want);
}

static size_t redis_apply(loader_t *l)
{
    pthread_mutex_lock(&l->mu);
    struct rpend *p = l->pend;
    size_t n = l->npend;
    l->pend = NULL;
    l->npend = l->cappend = 0;
    l->redis_dirty = false;
    pthread_mutex_unlock(&l->mu);
    if (n == 0) {
        free(p);
        return 0;
    }
    size_t mask, applied = 0, lines = 0, gone = 0;
    uint32_t *slot = NULL;
    if (l->nrz + n > l->caprz) { /* room for every pending zone to be new: no realloc below */
        struct rzone *r = realloc(l->rz, (l->nrz + n) * sizeof(*r));
        if (r) {
            l->rz = r;
            l->caprz = l->nrz + n;
        }
    }
    if (l->nrz + n > l->caprz || !(slot = rz_index(l, n, &mask))) {
        log_err("redis: out of memory; %zu zone changes dropped (the next verify retries)", n);
        for (size_t i = 0; i < n; i++) {
            zone_free(p[i].zone);
            free(p[i].names);
            free(p[i].key);
        }
        free(p);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        size_t h = tern_hash_str(p[i].key) & mask;
        while (slot[h] && strcmp(l->rz[slot[h] - 1].key, p[i].key) != 0)
            h = (h + 1) & mask;
        struct rzone *r = slot[h] ? &l->rz[slot[h] - 1] : NULL;
        if (!p[i].zone) { /* gone: emptied now, compacted below (indexes stay valid meanwhile) */
            if (r && r->zone) {
                if (lines++ < LOG_ZONES_MAX) /* a full resync may change thousands */
                    log_info("redis: zone %s removed", r->key);
                zone_free(r->zone);
                r->zone = NULL;
                gone++;
                applied++;
            }
            free(p[i].key);
            continue;
        }
        if (p[i].names) {
            /* a patch of the zone served; anything it cannot do, a verify builds whole */
            zone_t *nz = NULL;
            int rc = 1;
            char why[512] = "the zone is not served";
            const uint8_t **nv = calloc(p[i].nnames ? p[i].nnames : 1, sizeof(*nv));
            if (!nv) {
                rc = TERN_ENOMEM;
            } else if (r && r->zone) {
                const uint8_t *q = p[i].names;
                for (size_t k = 0; k < p[i].nnames; q += dname_len(q), k++)
                    nv[k] = q;
                int64_t t0 = tern_monotonic_us();
                rc = zone_patch_names(r->zone, p[i].zone, nv, p[i].nnames, &nz, why, sizeof(why));
                if (rc == 0 && lines++ < LOG_ZONES_MAX)
                    log_info("redis: zone %s patched: %zu names in %.1f ms", r->key, p[i].nnames,
                             (double)(tern_monotonic_us() - t0) / 1000.0);
            }
            free(nv);
            zone_free(p[i].zone);
            free(p[i].names);
            free(p[i].key);
            if (rc != 0) {
                log_info("redis: zone %s: a patch cannot be applied (%s): building it whole",
                         r ? r->key : "?", rc == TERN_ENOMEM ? "out of memory" : why);
                redis_source_resync(l->redis, false);
                continue;
            }
            redis_raise_serial(l, r->key, true, r->zone->serial, nz);
            zone_free(r->zone);
            r->zone = nz;
            r->version = __atomic_add_fetch(&zone_reads, 1, __ATOMIC_RELAXED);
            r->loaded = (int64_t)time(NULL);
            applied++;
            continue;
        }
        if (!r) {
            slot[h] = (uint32_t)l->nrz + 1;
            r = &l->rz[l->nrz++];
            *r = (struct rzone){.key = p[i].key};
        } else {
            free(p[i].key);
        }
        bool had = r->zone != NULL;
        uint32_t last = had ? r->zone->serial : 0;
        if (r->zone) {
            if (lines++ < LOG_ZONES_MAX)
                log_info("redis: zone %s updated (serial %u -> %u)", r->key, r->zone->serial,
                         p[i].zone->serial);
            zone_free(r->zone);
        } else {
            if (lines++ < LOG_ZONES_MAX)
                log_info("redis: zone %s added (serial %u)", r->key, p[i].zone->serial);
        }
        redis_raise_serial(l, r->key, had, last, p[i].zone);
        r->zone = p[i].zone;
        r->version = __atomic_add_fetch(&zone_reads, 1, __ATOMIC_RELAXED);
        r->loaded = (int64_t)time(NULL);
        applied++;
    }
    if (lines > LOG_ZONES_MAX)
        log_info("redis: ... and %zu more zone changes", lines - LOG_ZONES_MAX);
    if (gone) {
        size_t k = 0;
        for (size_t i = 0; i < l->nrz; i++) {
            if (l->rz[i].zone)
                l->rz[k++] = l->rz[i];
            else
                free(l->rz[i].key);
        }
        l->nrz = k;
    }
    free(slot);
    free(p);
    return applied;
}

/* Loader thread: drop every Redis zone (the source was turned off or moved elsewhere). */
static void redis_clear(loader_t *l)
{
    for (size_t i = 0; i < l->nrz; i++) {
        zone_free(l->rz[i].zone);
        free(l->rz[i].key);
    }
    l->nrz = 0;
    pthread_mutex_lock(&l->mu);
    for (size_t i = 0; i < l->npend; i++) {
        zone_free(l->pend[i].zone);
        free(l->pend[i].names);
        free(l->pend[i].key);
    }
    l->npend = 0;
    l->redis_dirty = false;
    l->redis_synced = false;
    pthread_mutex_unlock(&l->mu);
}

static void redis_stop(loader_t *l)
{
    pthread_mutex_lock(&l->rs_mu);
    redis_source_t *rs = l->redis;
    l->redis = NULL;
    pthread_mutex_unlock(&l->rs_mu);
    redis_source_stop(rs); /* joins: no callback runs after this */
    redis_cfg_free(&l->redis_cfg);
}

/* Start the source for cfg->redis (loader or main thread). 0 or a negative code (logged). */
static int redis_start(loader_t *l, const config_t *cfg)
{
    const config_redis_t *c = &cfg->redis;
    redis_source_config_t rc;
    redis_source_config_init(&rc);
    rc.host = c->host;
    if (c->port)
        rc.port = c->port;
    rc.unix_path = c->unix_path;
    rc.db = c->db;
    rc.password = c->password;
    rc.prefix = c->prefix;
    rc.suffix = c->suffix;
    rc.connect_timeout_ms = c->connect_timeout_ms;
    rc.read_timeout_ms = c->read_timeout_ms;
    rc.zone_reload_s = c->zone_reload_s;
    rc.changes_channel = c->changes_channel;
    rc.sentinels = (const char *const *)c->sentinels;
    rc.nsentinels = c->nsentinels;
    rc.sentinel_master = c->sentinel_master;
    rc.sentinel_password = c->sentinel_password;
    rc.read_replica = c->read_from == CONFIG_REDIS_READ_REPLICA;
    rc.json.locate = redis_locate;
    rc.json.locate_ctx = l;
    rc.json.health = cfg->health.enabled ? l->health : NULL;
    rc.json.health_fn = redis_health;
    rc.json.health_ctx = l;
    l->redis_health = cfg->health.enabled;
    rc.json.default_ttl = c->default_ttl;
    rc.json.max_ttl = c->max_ttl;
    rc.max_value_bytes = c->max_value_bytes;
    rc.max_labels = c->max_labels;
    rc.max_rrset_records = c->max_rrset_records;
    rc.max_zones = c->max_zones;
    rc.dnssec_workers = cfg->workers;
    rc.dnssec_policy.lifetime = cfg->dnssec_lifetime;
    rc.dnssec_policy.refresh = cfg->dnssec_refresh;
    redis_source_callbacks_t cb = {.on_zone = redis_on_zone,
                                   .on_zone_gone = redis_on_gone,
                                   .on_patch = redis_on_patch,
                                   .on_state = redis_on_state,
                                   .on_synced = redis_on_synced,
                                   .ctx = l};
    char err[512] = "";
    if (redis_cfg_copy(&l->redis_cfg, c) < 0) {
        log_err("redis: out of memory");
        return TERN_ENOMEM;
    }
    redis_source_t *rs = redis_source_start(&rc, &cb, err, sizeof(err));
    pthread_mutex_lock(&l->rs_mu);
    l->redis = rs;
    pthread_mutex_unlock(&l->rs_mu);
    if (!rs) {
        log_err("redis: %s", err[0] ? err : "cannot start the source");
        redis_cfg_free(&l->redis_cfg);
        return TERN_EINVAL;
    }
    if (c->nsentinels)
        log_info("redis: zones from the %s of Sentinel's %s (%zu sentinels) db %u",
                 rc.read_replica ? "replicas" : "primary", c->sentinel_master, c->nsentinels,
                 c->db);
    else if (c->unix_path)
        log_info("redis: zones from %s db %u", c->unix_path, c->db);
    else
        log_info("redis: zones from %s:%u db %u", c->host ? c->host : REDIS_SOURCE_DEFAULT_HOST,
                 c->port ? c->port : REDIS_SOURCE_DEFAULT_PORT, c->db);
    return 0;
}

/* After a build: start, restart, stop or resync the source as cfg says. geo_changed: the
 * databases records are located with changed, or the health checks by address changed (rebuild
 * every Redis zone). Turning health checking on or off restarts the source: its builds intern
 * the zones' own health_checks only when it is on. */
static void redis_follow(loader_t *l, const config_t *cfg, bool geo_changed)
{
    bool want = cfg->redis.enabled;
    if (l->redis && (!want || !redis_settings_same(&l->redis_cfg, &cfg->redis) ||
                     l->redis_health != cfg->health.enabled)) {
        log_info("redis: settings changed; %s", want ? "reconnecting" : "source stopped");
        redis_stop(l);
        redis_clear(l);
    }
    if (want && !l->redis)
        (void)redis_start(l, cfg);
    else if (l->redis)
        redis_source_resync(l->redis, geo_changed);
}

/* Loader thread: publish the queued Redis changes; file zones and databases as they are. */
static void redis_publish(loader_t *l)
{
    if (redis_apply(l) == 0 || !l->cfg_last)
        return;
    char err[1024] = "";
    struct snapshot *s;
    size_t changed;
    int64_t start = tern_monotonic_ms();
    if (build(l, l->cur, l->cfg_last, true, &s, &changed, err, sizeof(err)) < 0) {
        log_err("redis: cannot publish the changes: %s; still serving the previous data", err);
        return;
    }
    log_changes(l->cur, s);
    size_t nz = s->nz, records = s->records;
    publish(l, s);
    pthread_mutex_lock(&l->mu);
    l->stats.zones = nz;
    l->stats.records = records;
    l->stats.redis_publishes++;
    pthread_mutex_unlock(&l->mu);
    log_debug("redis: published %zu changed zones in %lld ms", changed,
              (long long)(tern_monotonic_ms() - start));
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

/* One reload on the loader thread. */
static void reload(loader_t *l)
{
    char err[1024];
    if (l->listener)
        l->listener(l->listener_ctx, false, NULL);
    int64_t start = tern_monotonic_ms();
    uint64_t gen = ++l->generation;
    config_t *cfg = calloc(1, sizeof(*cfg));
    struct snapshot *s = NULL;
    size_t changed = 0;
    bool ok = false;
    err[0] = '\0';
    if (!cfg) {
        snprintf(err, sizeof(err), "out of memory");
    } else if (read_config(l, cfg, true, err, sizeof(err)) < 0) {
        /* nothing of it applies: the config and zones in force stay (logged below) */
    } else {
        warn_restart_only(l->cfg0, cfg);
        (void)redis_apply(l);
        ok = build(l, l->cur, cfg, false, &s, &changed, err, sizeof(err)) == 0;
        if (ok) {
            /* logging settings apply at once (the target switch is atomic per line) */
            log_set_level(cfg->log_level);
            log_set_target(cfg->log_target);
        }
    }
    bool geo_changed = false;
    if (ok) {
        geo_changed = redis_set_geo(l, s);
        if (!config_same_health_checks(&l->cfg_last->health, &cfg->health)) {
            geo_changed = true; /* the Redis zones too are built again */
            if (redis_set_health(l, cfg) < 0)
                log_err("health: out of memory; Redis zones keep their previous checks");
        }
        health_follow(l, cfg);
        aname_configure(l, cfg);
        if (l->xfr && xfr_configure(l->xfr, cfg) < 0)
            log_err("xfr: out of memory; transfers keep their previous settings");
        redis_follow(l, cfg, geo_changed);
        if (l->cfg_last != l->cfg0) {
            config_free(l->cfg_last);
            free(l->cfg_last);
        }
        l->cfg_last = cfg;
        cfg = NULL;
    }
    if (cfg) {
        config_free(cfg);
        free(cfg);
    }
    size_t nz = s ? s->nz : 0, records = s ? s->records : 0, bytes = s ? s->bytes : 0;
    if (ok) {
        log_changes(l->cur, s);
        publish(l, s);
    }
    int64_t ms = tern_monotonic_ms() - start;
    if (ok)
        log_info("reload #%llu ok: %zu zones (%zu changed, %zu unchanged), %zu records "
                 "(%.1f MiB) in %lld ms",
                 (unsigned long long)gen, nz, changed, nz - changed, records,
                 (double)bytes / (1 << 20), (long long)ms);
    else
        log_err("reload #%llu failed: %s; still serving the previous config and data",
                (unsigned long long)gen, err);

    pthread_mutex_lock(&l->mu);
    if (ok) {
        l->stats.reloads_ok++;
        l->stats.zones = nz;
        l->stats.records = records;
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

/* The transfer thread: a new version of secondary zone key (or NULL: expired). */
void loader_zone_in(void *ctx, const char *key, zone_t *z)
{
    loader_t *l = ctx;
    char *k = strdup(key);
    pthread_mutex_lock(&l->mu);
    if (!k || tern_grow((void **)&l->spend, &l->capspend, l->nspend + 1, sizeof(*l->spend)) < 0) {
        pthread_mutex_unlock(&l->mu);
        log_err("xfr: zone %s: out of memory; the new version is dropped (the next refresh "
                "retries)",
                key);
        free(k);
        zone_free(z);
        return;
    }
    l->spend[l->nspend++] = (struct spend){.key = k, .zone = z};
    l->sec_dirty = true;
    pthread_cond_signal(&l->wake);
    pthread_mutex_unlock(&l->mu);
}

/* Loader thread: serve the secondary zones' new versions. */
static void sec_publish(loader_t *l)
{
    pthread_mutex_lock(&l->mu);
    struct spend *p = l->spend;
    size_t n = l->nspend;
    l->spend = NULL;
    l->nspend = l->capspend = 0;
    l->sec_dirty = false;
    pthread_mutex_unlock(&l->mu);
    size_t applied = 0;
    for (size_t i = 0; i < n; i++) {
        struct szone *sz = sec_get(l, p[i].key, NULL);
        zone_t *z = p[i].zone;
        if (!z) { /* expired: SERVFAIL until a transfer succeeds */
            uint8_t apex[DNAME_MAXLEN];
            const char *why;
            if (dname_from_str(p[i].key, strlen(p[i].key), false, apex, &why) >= 0)
                z = zone_new_unavailable(apex, "secondary zone (expired)");
        }
        if (!sz || !z) {
            log_err("xfr: zone %s: out of memory; the change is dropped", p[i].key);
            zone_free(z);
        } else {
            zone_free(sz->zone);
            sz->zone = z;
            sz->version = __atomic_add_fetch(&zone_reads, 1, __ATOMIC_RELAXED);
            sz->loaded = (int64_t)time(NULL);
            applied++;
        }
        free(p[i].key);
    }
    free(p);
    if (!applied || !l->cfg_last)
        return;
    char err[1024] = "";
    struct snapshot *s;
    size_t changed;
    if (build(l, l->cur, l->cfg_last, true, &s, &changed, err, sizeof(err)) < 0) {
        log_err("xfr: cannot publish the transferred zones: %s; still serving the previous data",
                err);
        return;
    }
    size_t nz = s->nz, records = s->records;
    publish(l, s);
    pthread_mutex_lock(&l->mu);
    l->stats.zones = nz;
    l->stats.records = records;
    pthread_mutex_unlock(&l->mu);
}

void loader_set_xfr(loader_t *l, struct xfr *x)
{
    l->xfr = x;
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
    /* Each pass serves every request made before it started; ends on stop. */
    while (!l->stop) {
        if (l->finished == l->requested) {
            if (l->redis_dirty) {
                pthread_mutex_unlock(&l->mu);
                redis_publish(l);
                pthread_mutex_lock(&l->mu);
                continue;
            }
            if (l->aname_dirty) {
                pthread_mutex_unlock(&l->mu);
                aname_publish(l);
                pthread_mutex_lock(&l->mu);
                continue;
            }
            if (l->sec_dirty) {
                pthread_mutex_unlock(&l->mu);
                sec_publish(l);
                pthread_mutex_lock(&l->mu);
                continue;
            }
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += RESIGN_CHECK_S;
            if (pthread_cond_timedwait(&l->wake, &l->mu, &until) == ETIMEDOUT) {
                pthread_mutex_unlock(&l->mu);
                resign_due(l);
                pthread_mutex_lock(&l->mu);
            }
            continue;
        }
        uint64_t upto = l->requested;
        pthread_mutex_unlock(&l->mu);
        reload(l);
        pthread_mutex_lock(&l->mu);
        l->finished = upto;
        pthread_cond_broadcast(&l->done);
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
    l->aname_ready_fd = -1;
    l->config_fn = fn;
    l->config_ctx = ctx;
    l->arena = mem_arena_create();
    l->stats.last_duration_ms = -1;
    pthread_mutex_init(&l->mu, NULL);
    pthread_mutex_init(&l->geo_mu, NULL);
    pthread_mutex_init(&l->rs_mu, NULL);
    pthread_mutex_init(&l->health_mu, NULL);
    pthread_cond_init(&l->wake, NULL);
    pthread_cond_init(&l->done, NULL);
    if (!(l->health = health_registry_new())) {
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
    if (redis_set_health(l, cfg) < 0) {
        log_err("health: out of memory");
        rc = TERN_ENOMEM;
        goto out;
    }
    if (cfg->redis.enabled) {
        (void)redis_set_geo(l, s);
        if (redis_start(l, cfg) == 0 && redis_wait_first(l)) {
            redis_publish(l);
            s = l->cur;
        }
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

/* Startup: give the source the time to connect and read everything once, so the first answers
 * include the Redis zones. Redis down: go on with the file zones once a connection attempt has
 * had its timeout (the source keeps retrying). True when the first read finished. */
static bool redis_wait_first(loader_t *l)
{
    uint32_t cto = l->redis_cfg.connect_timeout_ms ? l->redis_cfg.connect_timeout_ms
                                                   : REDIS_SOURCE_DEFAULT_CONNECT_TIMEOUT;
    int64_t start = tern_monotonic_ms();
    /* a reachable Redis may take long for a huge zone (1M labels: seconds), bounded anyway */
    const int64_t read_limit_ms = 300000;
    for (;;) {
        pthread_mutex_lock(&l->mu);
        bool synced = l->redis_synced;
        pthread_mutex_unlock(&l->mu);
        if (synced)
            return true;
        redis_source_stats_t st;
        redis_source_get_stats(l->redis, &st);
        int64_t el = tern_monotonic_ms() - start;
        if ((!st.connected && el > (int64_t)cto + 500) || el > read_limit_ms) {
            log_warn("redis: not available yet; serving the file zones, retrying in the "
                     "background");
            return false;
        }
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 20 * 1000000};
        nanosleep(&ts, NULL);
    }
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
    aname_start(l);
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
    pthread_mutex_lock(&l->mu);
    *out = l->stats;
    pthread_mutex_unlock(&l->mu);
    /* under rs_mu: a reload on the loader thread may stop the source meanwhile */
    pthread_mutex_lock(&l->rs_mu);
    out->redis_enabled = l->redis != NULL;
    if (l->redis) {
        redis_source_stats_t st;
        redis_source_get_stats(l->redis, &st);
        out->redis_connected = st.connected;
        out->redis_zones = st.zones;
        out->redis_failed = st.failed;
        out->redis_zones_skipped = st.zones_skipped;
        out->redis_labels_skipped = st.labels_skipped;
        out->redis_over_value_bytes = st.over_value_bytes;
        out->redis_over_labels = st.over_labels;
        out->redis_over_rrset_records = st.over_rrset_records;
    }
    pthread_mutex_unlock(&l->rs_mu);
}

void loader_stop(loader_t *l)
{
    if (!l)
        return;
    /* The loader thread first: a reload in progress may be stopping, starting or resyncing the
     * source (redis_follow), so stopping the source under it would free what it is using, or
     * race it to stop the source twice and leave one it started after the stop. */
    if (l->started) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_cond_broadcast(&l->wake);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
        l->started = false;
    }
    /* Then the source, from here alone. Until it is joined its callbacks only queue zones under
     * l->mu (nobody applies them any more); loader_free()'s redis_clear() frees what they left. */
    if (l->redis)
        redis_stop(l);
    /* the ANAME resolver: its callback only queues results under l->mu */
    aname_resolver_free(l->aname);
    __atomic_store_n(&l->aname, NULL, __ATOMIC_RELEASE);
    l->aname_started = false;
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
    redis_clear(l);
    free(l->rz);
    free(l->pend);
    geo_ref_put(l->rgeo_v4);
    geo_ref_put(l->rgeo_v6);
    snapshot_free(l->cur); /* its zones drop their endpoints */
    aname_results_release(l->aname_cur);
    aname_results_release(l->aname_next);
    if (l->aname_ready_fd >= 0)
        close(l->aname_ready_fd);
    for (size_t i = 0; i < l->nsec; i++) {
        zone_free(l->sec[i].zone);
        free(l->sec[i].key);
    }
    free(l->sec);
    for (size_t i = 0; i < l->nspend; i++) {
        zone_free(l->spend[i].zone);
        free(l->spend[i].key);
    }
    free(l->spend);
    limit_shared_free(l->limits); /* after every view that used it */
    health_index_free(l->rhidx);
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
    pthread_mutex_destroy(&l->rs_mu);
    pthread_mutex_destroy(&l->health_mu);
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
    memset(out, 0, sizeof(*out));
    /* made by the loader thread; freed only by loader_stop(), after the control and metrics
     * threads stop */
    aname_resolver_t *r = __atomic_load_n(&l->aname, __ATOMIC_ACQUIRE);
    if (!r)
        return false;
    aname_resolver_stats(r, out);
    return true;
}

int loader_aname_ready_fd(loader_t *l)
{
    /* made with the resolver, before it is stored (release) */
    return __atomic_load_n(&l->aname, __ATOMIC_ACQUIRE) ? l->aname_ready_fd : -1;
}

void loader_aname_log_pending(loader_t *l)
{
    aname_resolver_t *r = __atomic_load_n(&l->aname, __ATOMIC_ACQUIRE);
    if (r)
        aname_resolver_log_pending(r);
}

limit_shared_t *loader_limits(loader_t *l)
{
    return l->limits;
}
