/*
 * view_build.c — see view_build.h.
 */
#include "view_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <time.h>

#include "tern/common/err.h"
#include "tern/common/file.h"
#include "tern/common/log.h"
#include "tern/source/health_index.h"
#include "tern/source/source_aname.h"
#include "tern/xfr/xfr.h"
#include "tern/zone/zone_file.h"

#include "view_db.h"
#include "view_latency.h"
#include "zone_kasp.h"
#include "zone_sign.h"

/* View generations handed out (answer_view_t.gen); 0 is never one. */
static uint64_t view_gens;

/* The source that owns configured zone cz (keeps its versions: served()), or NULL: a file. */
static zone_source_t *owner(const view_build_env_t *l, const config_zone_t *cz)
{
    for (size_t i = 0; i < l->nsrc; i++)
        if (l->src[i]->ops->owns && l->src[i]->ops->owns(cz))
            return l->src[i];
    return NULL;
}

/* build(): configured zone cz, as its source src serves it, into s. */
static int add_served(struct snapshot *s, const snapshot_index_t *ix, zone_source_t *src,
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
    const struct zent *prev = snapshot_find(ix, e->key);
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
static size_t source_zone_count(const view_build_env_t *l)
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
static int add_source_zone(struct snapshot *s, const snapshot_index_t *ix,
                           const snapshot_index_t *files, zone_source_t *src, zone_source_zone_t *r,
                           size_t *changed, char *err, size_t errlen)
{
    const char *name = src->ops->name;
    if (snapshot_find(files, r->key)) {
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
    const struct zent *prev = snapshot_find(ix, r->key);
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
        snapshot_zent_clear(e);
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
static int add_source_zones(const view_build_env_t *l, struct snapshot *s,
                            const snapshot_index_t *ix, size_t *changed, char *err, size_t errlen)
{
    if (!source_zone_count(l))
        return 0;
    snapshot_index_t files;
    if (snapshot_index_init(&files, s) < 0) {
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
    const view_build_env_t *l;
    const struct snapshot *old; /* the view served, or NULL */
    const config_t *cfg;
    bool quick;          /* a change of the sources: the files are not looked at again */
    snapshot_index_t ix; /* old's zones by key */
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
        (rc = view_db_geo_get(old ? old->geo_v4 : NULL, cfg->geoip_db, "geoip_db", b->quick,
                              &s->geo_v4, &b->geo_changed, b->err, b->errlen)) < 0)
        return rc;
    if (cfg->geoip_db_v6 &&
        (rc = view_db_geo_get(old ? old->geo_v6 : NULL, cfg->geoip_db_v6, "geoip_db_v6", b->quick,
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
        .seen = snapshot_dep_add,
        .seen_ctx = e,
        .health_fn = b->hx ? health_index_lookup : NULL,
        .health_ctx = b->hx,
        .health = b->cfg->health.enabled ? b->l->health : NULL,
        .locate = s->view.geoip.v4 || s->view.geoip.v6 ? view_db_locate : NULL,
        .locate_ctx = (void *)&s->view.geoip,
        .dnskeys = dnskeys,
        .dnskeys_len = dnskeys_len,
    };
    return src->ops->read(src, &rd, z, b->err, b->errlen);
}

/* The version served of e's zone, signed: what a new signing takes unchanged signatures from
 * (tern/dnssec/dnssec_zone.h). The loader thread is the only one re-signing it in place, and
 * it is this thread. */
static const zone_t *signed_prev(build_t *b, const struct zent *e)
{
    const struct zent *o = snapshot_find(&b->ix, e->key);
    return o && o->zone && o->zone->dnssec ? o->zone : NULL;
}

/* A signed zone that secondaries transfer: every version signed anew is a new version for them
 * (its signatures changed), so it is served with a serial above the last one (zone_serial_next())
 * before it is signed. */
/* The serial last served of zone key, kept in the DNSSEC state directory (<dir>/<key>.serial)
 * so a restart goes on from it: a zone whose serials run ahead of the Unix time (YYYYMMDDnn)
 * rises by one per signed version, and without it would fall back below what its secondaries
 * hold. NULL path: no state directory. */
static bool served_serial_path(const config_t *cfg, const char *key, char *path, size_t len)
{
    char dbuf[PATH_MAX];
    const char *dir = config_dnssec_state_dir(cfg, dbuf, sizeof(dbuf));
    return dir && (size_t)snprintf(path, len, "%s/%s.serial", dir, key) < len;
}

static bool served_serial_load(const config_t *cfg, const char *key, uint32_t *out)
{
    char path[PATH_MAX + DNAME_KEY_MAX + 16], err[256], *text = NULL;
    if (!served_serial_path(cfg, key, path, sizeof(path)) ||
        tern_file_read_text(path, 64, false, &text, err, sizeof(err)) < 0)
        return false;
    char *end = NULL;
    unsigned long v = strtoul(text, &end, 10);
    bool ok = end != text && (*end == '\n' || *end == '\0') && v <= UINT32_MAX;
    if (ok)
        *out = (uint32_t)v;
    else
        log_warn("zone %s: %s does not hold a serial; ignored", key, path);
    free(text);
    return ok;
}

static void served_serial_save(const config_t *cfg, const char *key, uint32_t serial)
{
    char path[PATH_MAX + DNAME_KEY_MAX + 16], err[512], line[16];
    if (!served_serial_path(cfg, key, path, sizeof(path)))
        return;
    char *slash = strrchr(path, '/');
    *slash = '\0';
    (void)mkdir(path, 0700); /* a zone with static keys may be the first to use it */
    *slash = '/';
    int n = snprintf(line, sizeof(line), "%u\n", serial);
    if (tern_file_replace(path, line, (size_t)n, 0644, err, sizeof(err)) < 0)
        log_warn("zone %s: %s; a restart may serve a lower serial than its secondaries hold", key,
                 err);
}

static int export_serial(build_t *b, const struct zent *e, zone_t *z)
{
    const struct zent *o = snapshot_find(&b->ix, e->key);
    bool had = o && o->zone && !o->zone->unavailable;
    uint32_t was = z->serial, last = had ? o->zone->serial : 0;
    if (!had)
        had = served_serial_load(b->cfg, e->key, &last);
    uint32_t want = zone_serial_next(had, last, was, (uint32_t)time(NULL));
    if (!had || want != last)
        served_serial_save(b->cfg, e->key, want);
    if (want == was)
        return 0;
    int rc = zone_set_serial_fresh(z, want);
    if (rc < 0) {
        snprintf(b->err, b->errlen, "zone %s: cannot raise its serial to %u: %s", e->key, want,
                 tern_strerror(rc));
        return rc;
    }
    log_info("zone %s: serial %u -> %u (signed anew for its secondaries)", e->key, was, want);
    return 0;
}

/* add_read(): configured zone cz read anew by src into e (a changed master file first as a
 * patch of the version served, see snapshot_patch_base()). A zone tern signs gets its keys first
 * (the builder adds their DNSKEYs) and its signatures once it is built. 0 or a negative code. */
static int read_zone(build_t *b, const struct snapshot *s, zone_source_t *src, struct zent *e,
                     const config_zone_t *cz, zone_t **out)
{
    dnssec_zone_t *dz = NULL;
    uint8_t dnskeys[DNSSEC_SETUP_DNSKEYS_MAX];
    size_t dnskeys_len = 0;
    zone_t *z = NULL;
    int rc;
    if (!cz->dnssec_policy && zone_kasp_signing(b->l->kasp, e->key)) {
        /* served unsigned at once, it would be bogus wherever the parent's DS is cached */
        snprintf(b->err, b->errlen,
                 "zone %s: its managed keys are in use and its parent may hold its DS: to stop "
                 "signing, set dnssec: {policy: ..., unsign: true} first, and remove dnssec once "
                 "`ternctl dnssec status` shows no key in use (RFC 8078)",
                 e->key);
        return TERN_EINVAL;
    }
    if (cz->ndnssec_keys && (rc = zone_sign_prepare(cz, b->cfg, snapshot_dep_add, e, &dz, dnskeys,
                                                    &dnskeys_len, b->err, b->errlen)) < 0)
        return rc;
    if (cz->dnssec_policy &&
        (rc = zone_sign_prepare_policy(b->l->kasp, e->key, cz, b->cfg, &dz, dnskeys, &dnskeys_len,
                                       b->err, b->errlen)) < 0)
        return rc;
    const struct zent *base = dz ? NULL : snapshot_patch_base(&b->ix, e, cz, b->health_changed);
    rc = base ? source_read(b, s, src, e, cz, base->zone, NULL, 0, &z) : ZONE_FILE_BUILD;
    if (rc == ZONE_FILE_BUILD) {
        if (base)
            snapshot_deps_clear(
                e); /* the patch attempt's (a signed zone has no base: its keys stay) */
        rc = source_read(b, s, src, e, cz, NULL, dz ? dnskeys : NULL, dnskeys_len, &z);
        if (rc >= 0 && dz && dz->policy.export)
            rc = export_serial(b, e, z);
        if (rc >= 0 && dz)
            rc = dnssec_setup_attach(z, dz, signed_prev(b, e), b->err,
                                     b->errlen); /* frees dz on failure */
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
    if (rc >= 0 && cz->dnssec_policy && z)
        zone_kasp_built(b->l->kasp, e->key, z);
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

static bool is_stale(const view_build_env_t *l, const char *key)
{
    for (size_t i = 0; i < l->nstale; i++)
        if (strcmp(l->stale[i], key) == 0)
            return true;
    return false;
}

/* Pass 2a: configured zone cz, read by src (files): the version served again while none of
 * its files changed (nor its owner asked for it, zone_sink_t.reread), else read_zone(). */
static int add_read(build_t *b, struct snapshot *s, zone_source_t *src, const config_zone_t *cz)
{
    struct zent *e = &s->z[s->nz++];
    if (!(e->key = zone_source_key(cz->origin)) || !(e->file = strdup(cz->file)) ||
        !(e->signing = zone_sign_ident(cz, b->cfg)))
        return nomem(b);
    e->format = cz->format;
    const struct zent *prev =
        is_stale(b->l, e->key)
            ? NULL
            : snapshot_reusable(&b->ix, e->key, e->file, e->format, e->signing, b->quick);
    if (prev && ((cz->format == CONFIG_ZONE_JSON && b->geo_changed) || b->health_changed))
        prev = NULL;
    zone_t *z = NULL;
    int rc;
    if (prev) {
        if (snapshot_deps_copy(e, prev) < 0)
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
    const view_build_env_t *l = b->l;
    int rc;
    if ((cfg->asn_table || cfg->asn_db) &&
        (rc = view_db_asn_get(old ? old->asn : NULL, cfg, b->quick, &s->asn, b->err, b->errlen)) <
            0)
        return rc;
    if ((cfg->latency_map.file || cfg->latency_map.redis_key) &&
        (rc = view_latency_get(old ? old->latency : NULL, cfg, b->quick, l->stop, l->stop_fd,
                               &s->latency, b->err, b->errlen)) < 0)
        return rc;
    if (zone_table_freeze(s->table) < 0)
        return nomem(b);
    s->view.table = s->table;
    s->view.asn = s->asn ? s->asn->t : NULL;
    s->view.latency = s->latency ? s->latency->m : NULL;
    /* The workers cache geo lookups per view generation: a new one only when a database
     * changed, so source publishes and zone reloads keep the caches warm. */
    if (old && old->asn == s->asn && old->geo_v4 == s->geo_v4 && old->geo_v6 == s->geo_v6)
        s->view.gen = old->view.gen;
    else
        s->view.gen = __atomic_add_fetch(&view_gens, 1, __ATOMIC_RELAXED);
    int lrc = 0;
    s->limit = l->limits ? config_limit_new(l->limits, cfg, &lrc) : NULL;
    if (lrc < 0) {
        snprintf(b->err, b->errlen, "limits: %s", tern_strerror(lrc));
        return lrc;
    }
    s->view.limit = s->limit;
    zone_source_t *aname = zone_source_find(l->src, l->nsrc, "aname");
    s->aname = aname ? source_aname_results(aname) : NULL;
    s->view.aname = s->aname;
    for (size_t i = 0; i < s->nz && !s->view.dnssec; i++)
        s->view.dnssec = s->z[i].zone && s->z[i].zone->dnssec;
    s->view.cfg.edns_max_udp = cfg->edns_max_udp;
    s->view.cfg.xfr = l->xfr && xfr_wanted(cfg);
    s->view.cfg.identity = s->identity;
    s->view.cfg.version = s->version;
    s->view.cfg.sticky_prefix_v4 = (uint8_t)cfg->steering.sticky_prefix_v4; /* steering: */
    s->view.cfg.sticky_prefix_v6 = (uint8_t)cfg->steering.sticky_prefix_v6;
    return 0;
}

int view_build(const view_build_env_t *l, const struct snapshot *old, const config_t *cfg,
               bool quick, struct snapshot **out, size_t *changed, char *err, size_t errlen)
{
    build_t b = {.l = l, .old = old, .cfg = cfg, .quick = quick, .err = err, .errlen = errlen};
    struct snapshot *s = NULL;
    int rc = TERN_ENOMEM;
    *out = NULL;
    *changed = 0;
    err[0] = '\0';
    if (snapshot_index_init(&b.ix, old) < 0)
        return nomem(&b);
    bool nomem_hx;
    /* Health checks by address: every zone is built again when they change (or when health
     * checking is turned on or off), so its records point at the right endpoints. */
    b.hx = health_index_new(l->health, &cfg->health, &nomem_hx);
    b.health_changed = old && !config_same_health_checks(&l->cfg_in_force->health, &cfg->health);
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
