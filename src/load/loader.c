/*
 * loader.c — see loader.h. Snapshots, change detection, the reload thread.
 */
#include "tern/load/loader.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
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
#include "tern/xfr/journal.h"
#include "tern/xfr/xfr.h"
#include "tern/zone/zone_file.h"
#include "tern/zone/zone_json.h"

#include "ds_check.h"
#include "loader_int.h"
#include "zone_kasp.h"
#include "tern/zone/aname_results.h"
#include "tern/zone/zone_table.h"
#include "tern/source/health_index.h"
#include "tern/source/source_aname.h"
#include "tern/source/source_redis.h"
#include "tern/source/zone_source.h"

#include "snapshot.h"
#include "view_build.h"
#include "view_db.h"

struct loader {
    loader_config_fn config_fn;
    void *config_ctx;
    const answer_view_t *published; /* RCU: written by tern_rcu_xchg, read by the workers */
    struct snapshot *cur;           /* == published, the writer's typed handle */
    /* cur's entries by key, made when src_secondary() first asks after a publish (catalogs
     * configured); cur_ix_of: the snapshot it indexes, NULL: none (each publish resets it) */
    snapshot_index_t cur_ix;
    const struct snapshot *cur_ix_of;
    config_t *cfg0; /* the startup config: listen, workers, TCP limits */
    unsigned arena;

    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* the loader thread waits here for requests */
    pthread_cond_t done; /* loader_reload_wait() waits here for a finished reload */
    uint64_t requested;  /* requests so far */
    uint64_t finished;   /* every request up to this one is covered by a finished reload */
    /* Set under mu by loader_stop_thread(), which then writes halt_fd (an eventfd, or -1) before
     * it joins the thread: atomic because a build's waits on peers read it without mu
     * (view_build_env_t.stop). */
    atomic_bool stop;
    int halt_fd;
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
    /* zones whose owners must read them again (sink.reread): queued under mu, then the loader
     * thread's until a build that read them is published */
    char **reread, **stale;
    size_t nreread, capreread, nstale, capstale;
    bool changes; /* chg or poked holds something (under mu) */
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
    loader_config_hook_fn config_hook;
    void *config_hook_ctx;

    /* The zones whose DNSSEC keys tern manages (zone_kasp.h): built again at each one's next
     * key event, and when the operator asks for a rollover or reports a DS. */
    zone_kasp_t *kasp;
    struct ds_check *dscheck; /* asks the parents for a new KSK's DS (ds_check.h) */
};

/* The source named name, or NULL. */
static zone_source_t *source_named(const loader_t *l, const char *name)
{
    return zone_source_find(l->src, l->nsrc, name);
}

/* view_build() for the loader: cfg's view, sharing what it can of the one served. */
static int build(loader_t *l, const config_t *cfg, bool quick, struct snapshot **out,
                 size_t *changed, char *err, size_t errlen)
{
    const view_build_env_t env = {.health = l->health,
                                  .cfg_in_force = l->cfg_last,
                                  .src = l->src,
                                  .nsrc = l->nsrc,
                                  .limits = l->limits,
                                  .xfr = l->xfr != NULL,
                                  .stale = (const char *const *)l->stale,
                                  .nstale = l->nstale,
                                  .kasp = l->kasp,
                                  .stop = &l->stop,
                                  .stop_fd = l->halt_fd};
    return view_build(&env, l->cur, cfg, quick, out, changed, err, errlen);
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

/* Each zone of s that is not the very version old had goes to the transfer side (journal,
 * NOTIFY); zones without transfer settings cost it one lookup. */
static void xfr_sync(loader_t *l, const struct snapshot *old, const struct snapshot *s)
{
    snapshot_index_t ix;
    if (snapshot_index_init(&ix, old) < 0) {
        log_err("xfr: out of memory; this publish is not journaled (secondaries get AXFR)");
        return;
    }
    for (size_t i = 0; i < s->nz; i++) {
        const struct zent *e = &s->z[i];
        const struct zent *o = snapshot_find(&ix, e->key);
        if (o && o->zone == e->zone)
            continue;
        xfr_zone_changed(l->xfr, e->key, o ? o->zone : NULL, e->zone);
    }
    free(ix.slot);
}

/* Loader thread, after a publish: the zones read again are read. */
static void stale_clear(loader_t *l)
{
    for (size_t i = 0; i < l->nstale; i++)
        free(l->stale[i]);
    l->nstale = 0;
}

/* Publish s and free what it replaces once no worker can still see it. */
static void publish(loader_t *l, struct snapshot *s)
{
    pthread_mutex_lock(&l->mu); /* loader_zones() reads l->cur under it */
    struct snapshot *old = l->cur;
    l->cur = s;
    /* the index of the snapshot published before goes with it (a new snapshot may sit where
     * the old one was: never match them by address) */
    free(l->cur_ix.slot);
    l->cur_ix.slot = NULL;
    l->cur_ix_of = NULL;
    pthread_mutex_unlock(&l->mu);
    const answer_view_t *prev = tern_rcu_xchg(&l->published, &s->view);
    (void)prev;     /* == &old->view */
    stale_clear(l); /* s read them again */
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

/* zone_sink_t.reread: a zone's owner must read it again at the next build. */
static int sink_reread(void *ctx, const char *key)
{
    loader_t *l = ctx;
    char *k = strdup(key);
    pthread_mutex_lock(&l->mu);
    if (!k ||
        tern_grow((void **)&l->reread, &l->capreread, l->nreread + 1, sizeof(*l->reread)) < 0) {
        pthread_mutex_unlock(&l->mu);
        free(k);
        return TERN_ENOMEM;
    }
    l->reread[l->nreread++] = k;
    l->changes = true;
    pthread_cond_signal(&l->wake);
    pthread_mutex_unlock(&l->mu);
    return 0;
}

/* Loader thread: the zones to read again, queued by sink_reread(), into l->stale. False when
 * out of memory (they stay queued for the next trigger). */
static bool take_rereads(loader_t *l)
{
    pthread_mutex_lock(&l->mu);
    bool any = l->nreread > 0, ok = true;
    if (any && tern_grow((void **)&l->stale, &l->capstale, l->nstale + l->nreread,
                         sizeof(*l->stale)) < 0) {
        ok = false;
    } else {
        for (size_t i = 0; i < l->nreread; i++)
            l->stale[l->nstale++] = l->reread[i];
        l->nreread = 0;
    }
    pthread_mutex_unlock(&l->mu);
    return any && ok;
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
    return take_rereads(l) || any;
}

/* Any thread (a source's): locate a record's address through the current geo databases. */
static bool src_locate(void *ctx, int family, const uint8_t *addr, double *lat, double *lon)
{
    loader_t *l = ctx;
    pthread_mutex_lock(&l->geo_mu);
    bool ok = (l->sgeo.v4 || l->sgeo.v6) && view_db_locate(&l->sgeo, family, addr, lat, lon);
    pthread_mutex_unlock(&l->geo_mu);
    return ok;
}

/* Loader thread (a source's apply()): secondaries follow zone key. */
static bool src_followed(void *ctx, const char *key)
{
    loader_t *l = ctx;
    return l->xfr && xfr_zone_wanted(l->xfr, key);
}

/* Loader thread (the catalog producer's published()): the zone served as key was added by a
 * source whose zones are copies of another primary's (zone_source_ops_t.copies: a catalog
 * member consumed). A configured zone is the config's to say (its primary:). */
static bool src_secondary(void *ctx, const char *key)
{
    loader_t *l = ctx;
    if (!l->cur)
        return false;
    if (!l->cur_ix_of) { /* reset by each publish */
        if (snapshot_index_init(&l->cur_ix, l->cur) < 0)
            return false; /* out of memory: offered as ours until the next publish asks again */
        l->cur_ix_of = l->cur;
    }
    const struct zent *e = snapshot_find(&l->cur_ix, key);
    return e && e->src && e->src->ops->copies;
}

/* Any thread (the Redis source's, for a zone it drives): its DS to look for at its parent. */
static void src_ds_want(void *ctx, const char *key, const char *origin,
                        const dnssec_kasp_ds_t *wants, size_t n, char *const *parents,
                        size_t nparents, unsigned interval)
{
    loader_t *l = ctx;
    ds_check_set(l->dscheck, key, origin, wants, n, parents, nparents, interval);
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
    view_db_geo_put(o4);
    view_db_geo_put(o6);
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

/* One more source, made with the loader's sink. 0 or TERN_ENOMEM. */
static int source_add(loader_t *l, const zone_source_ops_t *ops)
{
    size_t n = l->nsrc + 1;
    zone_source_t **src = realloc(l->src, n * sizeof(*src));
    if (src)
        l->src = src;
    uint64_t *pub = realloc(l->src_publishes, n * sizeof(*pub));
    if (pub)
        l->src_publishes = pub;
    bool *poked = realloc(l->poked, n * sizeof(*poked));
    if (poked)
        l->poked = poked;
    bool *touched = realloc(l->touched, n * sizeof(*touched));
    if (touched)
        l->touched = touched;
    if (!src || !pub || !poked || !touched)
        return TERN_ENOMEM;
    const zone_source_env_t env = {
        .sink = {.push = sink_push,
                 .poke = sink_poke,
                 .drop = sink_drop,
                 .reread = sink_reread,
                 .ctx = l},
        .health = l->health,
        .locate = src_locate,
        .locate_ctx = l,
        .followed = src_followed,
        .followed_ctx = l,
        .secondary = src_secondary,
        .ds_want = src_ds_want,
        .ds_want_ctx = l,
    };
    if (!(l->src[l->nsrc] = zone_source_new(ops, &env)))
        return TERN_ENOMEM;
    l->src_publishes[l->nsrc] = 0;
    l->poked[l->nsrc] = l->touched[l->nsrc] = false;
    l->nsrc++;
    return 0;
}

/* Make every source of the table, with the loader's sink. 0 or TERN_ENOMEM. */
static int sources_new(loader_t *l)
{
    size_t n;
    const zone_source_ops_t *const *ops = zone_source_table(&n);
    for (size_t i = 0; i < n; i++)
        if (source_add(l, ops[i]) < 0)
            return TERN_ENOMEM;
    return 0;
}

int loader_add_source(loader_t *l, const zone_source_ops_t *ops)
{
    return source_add(l, ops);
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
    if (l->config_hook)
        l->config_hook(l->config_hook_ctx, cfg);
    zone_kasp_retain(l->kasp, cfg);
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
    int rc = build(l, cfg ? cfg : l->cfg_last, !cfg, &s, changed, err, errlen);
    if (rc < 0) {
        if (cfg) {
            config_free(cfg);
            free(cfg);
        }
        return rc;
    }
    if (cfg) {
        follow_config(l, cfg, s);
        snapshot_log_changes(l->cur, s);
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
/* zone_kasp_due()'s callback: a managed zone's key event is due, build it again. */
static void kasp_reread(void *ctx, const char *key)
{
    if (sink_reread(ctx, key) < 0)
        log_err("dnssec: zone %s: out of memory; its key event waits for the next check", key);
}

static void resign_due(loader_t *l)
{
    struct snapshot *s = l->cur;
    uint32_t now = (uint32_t)time(NULL);
    zone_kasp_due(l->kasp, now, kasp_reread, l);
    for (size_t i = 0; s && i < s->nz; i++) {
        zone_t *z = s->z[i].zone;
        if (!z || !z->dnssec || !dnssec_zone_due(z->dnssec, now))
            continue;
        if (z->dnssec->export) {
            /* its secondaries need the new signatures too: a new version with a new serial,
             * read and signed again by the next build (tern/dnssec/dnssec_export.h); a
             * source with a thread of its own (Redis) does that on its thread */
            if (s->z[i].src)
                continue;
            if (sink_reread(l, s->z[i].key) < 0)
                log_err("dnssec: zone %s: out of memory; signed again at the next check",
                        s->z[i].key);
            else
                log_info("dnssec: zone %s: signatures due; signing a new version for its "
                         "secondaries",
                         s->z[i].key);
            continue;
        }
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

zone_kasp_t *loader_kasp(loader_t *l)
{
    return l->kasp;
}

int loader_reread(loader_t *l, const char *key)
{
    return sink_reread(l, key);
}

zone_source_t *loader_source(loader_t *l, const char *name)
{
    return source_named(l, name);
}

void loader_set_config_hook(loader_t *l, loader_config_hook_fn fn, void *ctx)
{
    l->config_hook = fn;
    l->config_hook_ctx = ctx;
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
    int64_t key_event = zone_kasp_next(l->kasp); /* a managed zone's next key event */
    until.tv_sec += RESIGN_CHECK_S;
    if (key_event && key_event < (int64_t)until.tv_sec)
        until = (struct timespec){.tv_sec = key_event > (int64_t)time(NULL) ? key_event : 0};
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
    /* without it a stalled Redis holds the stop for its timeouts, as before: logged, not fatal */
    if ((l->halt_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
        log_warn("loader: eventfd: %s: a reload waiting on Redis delays the stop", strerror(errno));
    pthread_mutex_init(&l->mu, NULL);
    pthread_mutex_init(&l->geo_mu, NULL);
    pthread_cond_init(&l->wake, NULL);
    pthread_cond_init(&l->done, NULL);
    if (!(l->health = health_registry_new()) || !(l->kasp = zone_kasp_new()) ||
        !(l->dscheck = ds_check_new(loader_dnssec_ds_found, l)) || sources_new(l) < 0) {
        loader_free(l);
        return NULL;
    }
    zone_kasp_set_checker(l->kasp, l->dscheck);
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
    rc = build(l, cfg, false, &s, &changed, err, sizeof(err));
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
    /* Everything the loader thread will own is started before the thread exists: start() and
     * health_follow() belong to the thread that owns the sources and the checker (zone_source.h),
     * and from pthread_create() on that is the loader thread, which may publish at once and
     * call into them (the ANAME source starts its resolver from published() too; a reload
     * follows the health config). What sources push meanwhile waits in the sink. */
    l->started = true;             /* health_follow(): the checker may start */
    health_follow(l, l->cfg_last); /* the checker runs once zones are loaded and checks are on */
    for (size_t i = 0; i < l->nsrc; i++)
        if (l->src[i]->ops->start)
            l->src[i]->ops->start(l->src[i]);
    if (ds_check_start(l->dscheck) < 0)
        log_err("dnssec: cannot start the DS checker; ternctl dnssec ds-seen still works");
    int e = pthread_create(&l->thread, NULL, loader_main, l);
    if (e != 0) {
        l->started = false; /* nothing to join; the supervisor still stops what started */
        log_err("cannot start the loader thread: %s", tern_strerror(-e));
        return -e;
    }
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

void loader_stop_thread(loader_t *l)
{
    /* The loader thread first: a reload in progress may be stopping, starting or resyncing a
     * source (sources_configure()), so stopping the source under it would free what it is using,
     * or race it to stop the source twice and leave one it started after the stop. */
    if (l && l->started) {
        pthread_mutex_lock(&l->mu);
        atomic_store(&l->stop, true);
        pthread_cond_broadcast(&l->wake);
        pthread_mutex_unlock(&l->mu);
        if (l->halt_fd >= 0)
            (void)eventfd_write(l->halt_fd, 1);
        pthread_join(l->thread, NULL);
        l->started = false;
    }
}

void loader_stop_sources(loader_t *l)
{
    /* From here alone. Until they are joined their threads only queue changes under l->mu
     * (nobody applies them any more); loader_free() frees what they left. */
    for (size_t i = 0; l && i < l->nsrc; i++)
        if (l->src[i]->ops->stop)
            l->src[i]->ops->stop(l->src[i]);
}

void loader_stop_health(loader_t *l)
{
    /* the checker last: a reload no longer configures or starts it */
    if (!l)
        return;
    health_checker_free(l->checker);
    l->checker = NULL;
    l->checker_started = false;
}

void loader_stop(loader_t *l)
{
    loader_stop_thread(l);  /* a caller of ds_check_set() */
    loader_stop_sources(l); /* the other: the Redis thread, for the zones it drives */
    /* its callback only queues a reread, marks the key state or asks a stopped source (refused):
     * all outlive it */
    ds_check_free(l->dscheck);
    l->dscheck = NULL;
    if (l->kasp)
        zone_kasp_set_checker(l->kasp, NULL);
    loader_stop_health(l);
}

void loader_free(loader_t *l)
{
    if (!l)
        return;
    loader_stop(l);
    for (size_t i = 0; i < l->nchg; i++)
        zone_change_clear(&l->chg[i]);
    free(l->chg);
    for (size_t i = 0; i < l->nreread; i++)
        free(l->reread[i]);
    free(l->reread);
    stale_clear(l);
    free(l->stale);
    free(l->cur_ix.slot);
    zone_kasp_free(l->kasp);
    view_db_geo_put(l->sgeo_v4);
    view_db_geo_put(l->sgeo_v6);
    snapshot_free(l->cur); /* its zones drop their endpoints */
    for (size_t i = 0; i < l->nsrc; i++)
        zone_source_free(l->src[i]); /* their zones drop their endpoints */
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
    if (l->halt_fd >= 0)
        close(l->halt_fd);
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
