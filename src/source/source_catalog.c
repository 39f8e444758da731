/*
 * source_catalog.c — see source_catalog.h. Catalog zones (RFC 9432) of the zones tern serves as
 * primary, recomputed after each publish, built again only when their members change.
 */
#include "tern/source/source_catalog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern/common/byteorder.h"
#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/hash.h"
#include "tern/common/log.h"
#include "tern/wire/dname.h"
#include "tern/wire/rr.h"
#include "tern/zone/zone_builder.h"
#include "tern/zone/zone_table.h"

/* SOA timers of a catalog. Changes reach the consumers by NOTIFY; refresh is the fallback for a
 * NOTIFY lost, ten minutes (as a member's own zones typically have). Retry a minute. Expire four
 * weeks: a consumer that cannot reach tern keeps the catalog, and with it every member zone, for
 * that long (RFC 9432 §5.6: an expired catalog deletes nothing, but BIND and Knot stop serving
 * it). Minimum 0: nothing under a catalog is cached negatively by anyone that matters. */
#define CAT_REFRESH 600
#define CAT_RETRY   60
#define CAT_EXPIRE  2419200
#define CAT_MINIMUM 0

/* Seed of the member ids' hash: fixed forever, as the ids must not change (source_catalog.h). */
#define CAT_ID_SEED 0x9432u

/* One member as the source keeps it (strings owned). */
typedef struct member {
    char *key, *group, *coo;
} member_t;

/* One catalog served: its members and the version built of them. */
typedef struct catalog {
    char *key; /* canonical origin */
    member_t *m;
    size_t n;
} catalog_t;

typedef struct source_catalog {
    zone_source_t base;
    zone_source_env_t env;
    catalog_t *cat;         /* cat[i]'s version is zs[i] */
    zone_source_zone_t *zs; /* what zones() hands the build */
    size_t ncat;            /* atomic for stats() */
    bool changed;           /* a version that the view does not serve yet (collect()) */
    /* what the last computation saw, to skip the next when nothing it depends on moved */
    bool known;       /* fp is the table's of the last computation */
    bool cfg_changed; /* a config came since (configure()) */
    uint64_t fp;      /* table_fingerprint() */
} source_catalog_t;

void source_catalog_id(const char *key, char id[SOURCE_CATALOG_ID_LEN])
{
    snprintf(id, SOURCE_CATALOG_ID_LEN, "%016llx",
             (unsigned long long)tern_hash64(key, strlen(key), CAT_ID_SEED));
}

/* "label.catalog" as a wire name into out. Its length, or a negative code. */
static int name_under(const char *label, const char *catalog, uint8_t *out)
{
    char text[DNAME_KEY_MAX + 64];
    const char *why;
    int n = snprintf(text, sizeof(text), "%s.%s", label, strcmp(catalog, ".") ? catalog : "");
    if (n < 0 || (size_t)n >= sizeof(text))
        return TERN_ERANGE;
    return dname_from_str(text, (size_t)n, false, out, &why);
}

static int wire_of(const char *name, uint8_t *out)
{
    const char *why;
    return dname_from_str(name, strlen(name), false, out, &why);
}

/* The apex records: SOA, NS invalid., version TXT "2". */
static int add_apex(zone_builder_t *b, const uint8_t *apex, size_t alen, uint32_t serial)
{
    static const uint8_t invalid[] = {7, 'i', 'n', 'v', 'a', 'l', 'i', 'd', 0};
    static const uint8_t version[] = {1, '2'};
    uint8_t soa[2 * sizeof(invalid) + 20], vname[DNAME_MAXLEN];
    memcpy(soa, invalid, sizeof(invalid));
    memcpy(soa + sizeof(invalid), invalid, sizeof(invalid));
    uint8_t *t = soa + 2 * sizeof(invalid);
    tern_wr32(t, serial);
    tern_wr32(t + 4, CAT_REFRESH);
    tern_wr32(t + 8, CAT_RETRY);
    tern_wr32(t + 12, CAT_EXPIRE);
    tern_wr32(t + 16, CAT_MINIMUM);
    if (alen + 8 > DNAME_MAXLEN)
        return TERN_ERANGE;
    vname[0] = 7;
    memcpy(vname + 1, "version", 7);
    memcpy(vname + 8, apex, alen);
    int rc;
    if ((rc = zone_builder_add(b, apex, WIRE_T_SOA, WIRE_CLASS_IN, 0, soa, sizeof(soa), NULL, 0)) <
            0 ||
        (rc = zone_builder_add(b, apex, WIRE_T_NS, WIRE_CLASS_IN, 0, invalid, sizeof(invalid), NULL,
                               0)) < 0)
        return rc;
    return zone_builder_add(b, vname, WIRE_T_TXT, WIRE_CLASS_IN, 0, version, sizeof(version), NULL,
                            0);
}

/* Member m's PTR and properties under catalog. */
static int add_member(zone_builder_t *b, const char *catalog, const source_catalog_entry_t *m)
{
    char id[SOURCE_CATALOG_ID_LEN], label[SOURCE_CATALOG_ID_LEN + 16];
    uint8_t owner[DNAME_MAXLEN], target[DNAME_MAXLEN];
    source_catalog_id(m->key, id);
    snprintf(label, sizeof(label), "%s.zones", id);
    int ol = name_under(label, catalog, owner), tl = wire_of(m->key, target), rc;
    if (ol < 0 || tl < 0)
        return ol < 0 ? ol : tl;
    if ((rc = zone_builder_add(b, owner, WIRE_T_PTR, WIRE_CLASS_IN, 0, target, (uint16_t)tl, NULL,
                               0)) < 0)
        return rc;
    if (m->group) {
        uint8_t txt[256];
        size_t gl = strlen(m->group);
        if (gl > 255)
            return TERN_EINVAL;
        txt[0] = (uint8_t)gl;
        memcpy(txt + 1, m->group, gl);
        snprintf(label, sizeof(label), "group.%s.zones", id);
        if ((ol = name_under(label, catalog, owner)) < 0)
            return ol;
        if ((rc = zone_builder_add(b, owner, WIRE_T_TXT, WIRE_CLASS_IN, 0, txt, (uint16_t)(gl + 1),
                                   NULL, 0)) < 0)
            return rc;
    }
    if (m->coo) {
        snprintf(label, sizeof(label), "coo.%s.zones", id);
        if ((ol = name_under(label, catalog, owner)) < 0 || (tl = wire_of(m->coo, target)) < 0)
            return ol < 0 ? ol : tl;
        if ((rc = zone_builder_add(b, owner, WIRE_T_PTR, WIRE_CLASS_IN, 0, target, (uint16_t)tl,
                                   NULL, 0)) < 0)
            return rc;
    }
    return 0;
}

int source_catalog_build(const char *catalog, const source_catalog_entry_t *m, size_t n,
                         uint32_t serial, zone_t **out, char *err, size_t errlen)
{
    uint8_t apex[DNAME_MAXLEN];
    char src[DNAME_KEY_MAX + 16];
    int alen = wire_of(catalog, apex), rc;
    if (alen < 0) {
        snprintf(err, errlen, "catalog %s: not a domain name", catalog);
        return alen;
    }
    snprintf(src, sizeof(src), "catalog %s", catalog);
    zone_builder_t *b = zone_builder_new(apex, src);
    if (!b) {
        snprintf(err, errlen, "catalog %s: out of memory", catalog);
        return TERN_ENOMEM;
    }
    zone_builder_expect(b, 3 + 3 * n);
    if ((rc = add_apex(b, apex, (size_t)alen, serial)) < 0) {
        snprintf(err, errlen, "catalog %s: %s", catalog, tern_strerror(rc));
        zone_builder_free(b);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        if ((rc = add_member(b, catalog, &m[i])) < 0) {
            snprintf(err, errlen, "catalog %s: member %s: %s", catalog, m[i].key,
                     tern_strerror(rc));
            zone_builder_free(b);
            return rc;
        }
    }
    return zone_builder_finish(b, out, err, errlen); /* frees b */
}

/* ---- membership -------------------------------------------------------------------------- */

static void members_free(member_t *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(m[i].key);
        free(m[i].group);
        free(m[i].coo);
    }
    free(m);
}

static int cmp_member(const void *a, const void *b)
{
    return strcmp(((const member_t *)a)->key, ((const member_t *)b)->key);
}

/* What membership is decided by, made once per publish that needs it: cfg's zone entries
 * sorted by key (bsearch: 100,000 Redis zones against 10,000 entries stay linear-ish), and the
 * catalogs' keys. */
typedef struct cz_entry {
    char *key;
    const config_zone_t *cz;
} cz_entry_t;

typedef struct index {
    cz_entry_t *e;
    size_t n;
    char **cat; /* cfg->ncatalogs keys; NULL for an origin that does not parse */
    size_t ncat;
} index_t;

static void index_free(index_t *x)
{
    for (size_t i = 0; i < x->n; i++)
        free(x->e[i].key);
    free(x->e);
    for (size_t i = 0; i < x->ncat; i++)
        free(x->cat[i]);
    free(x->cat);
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const cz_entry_t *)a)->key, ((const cz_entry_t *)b)->key);
}

static int index_init(index_t *x, const config_t *cfg)
{
    *x = (index_t){0};
    if ((cfg->nzones && !(x->e = calloc(cfg->nzones, sizeof(*x->e)))) ||
        (cfg->ncatalogs && !(x->cat = calloc(cfg->ncatalogs, sizeof(*x->cat)))))
        return TERN_ENOMEM;
    for (size_t i = 0; i < cfg->nzones; i++) {
        char *k = zone_source_key(cfg->zones[i].origin);
        if (!k) /* out of memory, or an origin that does not parse (it names no zone) */
            continue;
        x->e[x->n++] = (cz_entry_t){.key = k, .cz = &cfg->zones[i]};
    }
    if (x->n) /* qsort() wants a real array even for none */
        qsort(x->e, x->n, sizeof(*x->e), cmp_entry);
    for (; x->ncat < cfg->ncatalogs; x->ncat++)
        x->cat[x->ncat] = zone_source_key(cfg->catalogs[x->ncat].origin);
    return 0;
}

/* The zone entry of key: the one that sets catalog keys or makes it a secondary, else any. */
static const config_zone_t *cz_find(const index_t *x, const char *key)
{
    const cz_entry_t want = {.key = (char *)key};
    const cz_entry_t *e = x->n ? bsearch(&want, x->e, x->n, sizeof(*x->e), cmp_entry) : NULL;
    if (!e)
        return NULL;
    while (e > x->e && strcmp(e[-1].key, key) == 0)
        e--;
    for (const cz_entry_t *f = e; f < x->e + x->n && strcmp(f->key, key) == 0; f++)
        if (f->cz->catalog || f->cz->catalog_group || f->cz->catalog_coo || f->cz->nprimaries)
            return f->cz;
    return e->cz;
}

/* The index in x->cat of key, or -1: not a catalog. */
static long catalog_of(const index_t *x, const char *key)
{
    for (size_t i = 0; i < x->ncat; i++)
        if (x->cat[i] && strcmp(x->cat[i], key) == 0)
            return (long)i;
    return -1;
}

/* One catalog's members as they are gathered. */
typedef struct gather {
    member_t *m;
    size_t n, cap;
} gather_t;

/* Member key (taken) with cz's properties into g. 0 or TERN_ENOMEM. */
static int gather_add(gather_t *g, char *key, const config_zone_t *cz)
{
    if (tern_grow((void **)&g->m, &g->cap, g->n + 1, sizeof(*g->m)) < 0) {
        free(key);
        return TERN_ENOMEM;
    }
    member_t *m = &g->m[g->n++];
    *m = (member_t){.key = key};
    if (cz && ((cz->catalog_group && !(m->group = strdup(cz->catalog_group))) ||
               (cz->catalog_coo && !(m->coo = zone_source_key(cz->catalog_coo)))))
        return TERN_ENOMEM;
    return 0;
}

/* Every catalog's members in table t, in one pass over it: g[i] for cfg's catalog i. A zone is
 * a member of the catalog its entry names, else of every catalog with members: all; never when
 * it is a secondary (configured, or env's: a catalog member consumed), a catalog, or
 * unavailable. 0 or TERN_ENOMEM. */
static int members_of(const zone_source_env_t *env, const zone_table_t *t, const config_t *cfg,
                      const index_t *ix, gather_t *g)
{
    for (size_t i = 0; i < zone_table_count(t); i++) {
        const zone_t *z = zone_table_at(t, i);
        char text[DNAME_KEY_MAX + 1], *key;
        if (!z || z->unavailable || dname_to_str(z->apex, text, sizeof(text)) < 0)
            continue;
        if (!(key = zone_source_key(text)))
            return TERN_ENOMEM;
        const config_zone_t *cz = cz_find(ix, key);
        long named = -2; /* -2: no catalog named; -1: one that does not exist (never) */
        if (cz && cz->catalog) {
            char *k = zone_source_key(cz->catalog);
            named = k ? catalog_of(ix, k) : -1;
            free(k);
        }
        bool eligible = !(cz && cz->nprimaries) && catalog_of(ix, key) < 0 &&
                        !(env->secondary && env->secondary(env->followed_ctx, key));
        for (size_t c = 0; eligible && c < cfg->ncatalogs; c++) {
            bool in = named == -2 ? cfg->catalogs[c].members_all : named == (long)c;
            char *dup = in ? strdup(key) : NULL;
            if (in && (!dup || gather_add(&g[c], dup, cz) < 0)) {
                free(key);
                return TERN_ENOMEM;
            }
        }
        free(key);
    }
    for (size_t c = 0; c < cfg->ncatalogs; c++)
        if (g[c].n)
            qsort(g[c].m, g[c].n, sizeof(*g[c].m), cmp_member);
    return 0;
}

/* What membership depends on in t: the apexes served and whether each is available, in order. A
 * publish that changed records only (most Redis changes) has the same and costs no more. */
static uint64_t table_fingerprint(const zone_table_t *t)
{
    uint64_t h = CAT_ID_SEED;
    for (size_t i = 0; i < zone_table_count(t); i++) {
        const zone_t *z = zone_table_at(t, i);
        if (z)
            h = tern_hash64(z->apex, z->apex_len, h ^ z->unavailable);
    }
    return h;
}

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static bool members_same(const member_t *a, size_t na, const member_t *b, size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i].key, b[i].key) != 0 || !same_str(a[i].group, b[i].group) ||
            !same_str(a[i].coo, b[i].coo))
            return false;
    return true;
}

/* ---- the source -------------------------------------------------------------------------- */

static void catalog_clear(catalog_t *c, zone_source_zone_t *z)
{
    members_free(c->m, c->n);
    free(c->key);
    zone_free(z->zone);
    free(z->key);
}

/* At most this many member lines per new version; a first version may list 100,000. */
#define LOG_MEMBERS_MAX 20

/* Log what changed from old (no) to new (nn) members, both sorted, and warn of each new member
 * its consumers cannot transfer (no allow_transfer or notify: a catalog consumer would retry
 * it forever). */
static void log_diff(const source_catalog_t *s, const char *ckey, const member_t *o, size_t no,
                     const member_t *m, size_t nn)
{
    size_t i = 0, j = 0, lines = 0;
    while (i < no || j < nn) {
        int c = i == no ? 1 : j == nn ? -1 : strcmp(o[i].key, m[j].key);
        if (c == 0) {
            i++, j++;
            continue;
        }
        const char *key = c < 0 ? o[i++].key : m[j++].key;
        if (lines++ >= LOG_MEMBERS_MAX)
            continue;
        if (c > 0 && s->env.followed && !s->env.followed(s->env.followed_ctx, key))
            log_warn("catalogs: %s: member %s added, but it has no allow_transfer: its consumers "
                     "cannot transfer it",
                     ckey, key);
        else
            log_info("catalogs: %s: member %s %s", ckey, key, c < 0 ? "removed" : "added");
    }
    if (lines > LOG_MEMBERS_MAX)
        log_info("catalogs: %s: ... and %zu more members added or removed", ckey,
                 lines - LOG_MEMBERS_MAX);
}

/* A new version of catalog c (key ckey) with members m (taken), after c's (none: the
 * first since start) into c and z. 0, or a negative code (logged; the members stay as they were).
 */
static int catalog_update(const source_catalog_t *s, catalog_t *c, zone_source_zone_t *z,
                          const char *ckey, member_t *m, size_t n)
{
    source_catalog_entry_t *v = calloc(n ? n : 1, sizeof(*v));
    char err[512] = "";
    zone_t *nz = NULL;
    int rc = TERN_ENOMEM;
    if (v) {
        for (size_t i = 0; i < n; i++)
            v[i] = (source_catalog_entry_t){m[i].key, m[i].group, m[i].coo};
        uint32_t now = (uint32_t)time(NULL);
        uint32_t serial =
            zone_serial_next(z->zone != NULL, z->zone ? z->zone->serial : 0, now, now);
        rc = source_catalog_build(ckey, v, n, serial, &nz, err, sizeof(err));
    }
    free(v);
    if (rc < 0) {
        log_err("catalogs: %s; still serving its previous members", err[0] ? err : "out of memory");
        members_free(m, n);
        return rc;
    }
    log_diff(s, ckey, c->m, c->n, m, n);
    log_info("catalogs: %s: %zu members (was %zu), serial %u", ckey, n, c->n, nz->serial);
    members_free(c->m, c->n);
    c->m = m;
    c->n = n;
    zone_free(z->zone);
    z->zone = nz;
    z->version = zone_source_version();
    z->loaded = (int64_t)time(NULL);
    return 0;
}

/* The entry of catalog key in s, made (empty) when new: its index, or -1 when out of memory. */
static long catalog_slot(source_catalog_t *s, const char *key)
{
    for (size_t i = 0; i < s->ncat; i++)
        if (strcmp(s->cat[i].key, key) == 0)
            return (long)i;
    catalog_t *c = realloc(s->cat, (s->ncat + 1) * sizeof(*c));
    if (c)
        s->cat = c;
    zone_source_zone_t *z = realloc(s->zs, (s->ncat + 1) * sizeof(*z));
    if (z)
        s->zs = z;
    char *k1 = strdup(key), *k2 = strdup(key);
    if (!c || !z || !k1 || !k2) {
        free(k1);
        free(k2);
        return -1;
    }
    s->cat[s->ncat] = (catalog_t){.key = k1};
    s->zs[s->ncat] = (zone_source_zone_t){.key = k2};
    __atomic_store_n(&s->ncat, s->ncat + 1, __ATOMIC_RELAXED);
    return (long)s->ncat - 1;
}

/* Drop the catalogs x (cfg's) no longer has (and any left empty by a failed first build). */
static bool catalogs_retain(source_catalog_t *s, const index_t *x)
{
    size_t k = 0;
    bool dropped = false;
    for (size_t i = 0; i < s->ncat; i++) {
        if (catalog_of(x, s->cat[i].key) >= 0 && s->zs[i].zone) {
            s->cat[k] = s->cat[i];
            s->zs[k++] = s->zs[i];
            continue;
        }
        if (s->zs[i].zone)
            log_info("catalogs: %s: no longer configured; not served", s->cat[i].key);
        dropped |= s->zs[i].zone != NULL;
        catalog_clear(&s->cat[i], &s->zs[i]);
    }
    __atomic_store_n(&s->ncat, k, __ATOMIC_RELAXED);
    return dropped;
}

/* published(): catalog i of cfg from its gathered members g (taken). True when it changed. */
static bool catalog_follow(source_catalog_t *s, const index_t *x, size_t i, gather_t *g)
{
    long at = x->cat[i] ? catalog_slot(s, x->cat[i]) : -1;
    if (at < 0) {
        log_err("catalogs: %s: out of memory; it keeps its members", x->cat[i] ? x->cat[i] : "?");
        members_free(g->m, g->n);
        return false;
    }
    if (s->zs[at].zone && members_same(s->cat[at].m, s->cat[at].n, g->m, g->n)) {
        members_free(g->m, g->n); /* nothing changed: no new version, no churn */
        return false;
    }
    return catalog_update(s, &s->cat[at], &s->zs[at], x->cat[i], g->m, g->n) == 0;
}

/* Loader thread, after each publish: every catalog's members from t and cfg, when the zones
 * served or the config changed; a catalog whose members changed gets a new version and the
 * loader is poked to serve it. */
static void published(zone_source_t *src, const zone_table_t *t, const config_t *cfg)
{
    source_catalog_t *s = (source_catalog_t *)src;
    if (!cfg || (!cfg->ncatalogs && !s->ncat))
        return; /* no catalogs: the feature costs nothing */
    uint64_t fp = table_fingerprint(t);
    if (s->known && !s->cfg_changed && fp == s->fp)
        return;
    index_t x;
    gather_t *g = calloc(cfg->ncatalogs + 1, sizeof(*g));
    bool changed = false;
    if (!g || index_init(&x, cfg) < 0 || members_of(&s->env, t, cfg, &x, g) < 0) {
        log_err("catalogs: out of memory; the catalogs keep their members until the next publish");
        for (size_t i = 0; g && i < cfg->ncatalogs; i++)
            members_free(g[i].m, g[i].n);
        s->known = false; /* try again next time */
    } else {
        for (size_t i = 0; i < cfg->ncatalogs; i++)
            changed |= catalog_follow(s, &x, i, &g[i]);
        changed |= catalogs_retain(s, &x);
        s->known = true;
        s->fp = fp;
        s->cfg_changed = false;
    }
    if (g)
        index_free(&x);
    free(g);
    if (changed) {
        s->changed = true;
        s->env.sink.poke(s->env.sink.ctx, &s->base);
    }
}

/* Loader thread: a config is in force from the next publish on; membership is computed anew. */
static int configure(zone_source_t *src, const config_t *cfg, const config_t *prev, bool geo)
{
    (void)cfg;
    (void)prev;
    (void)geo;
    ((source_catalog_t *)src)->cfg_changed = true;
    return 0;
}

static bool collect(zone_source_t *src)
{
    source_catalog_t *s = (source_catalog_t *)src;
    bool c = s->changed;
    s->changed = false;
    return c;
}

/* Startup: a catalog computed by the first publish is served before the first answers. */
static bool wait_first(zone_source_t *src)
{
    return ((source_catalog_t *)src)->changed;
}

static zone_source_zone_t *zones(zone_source_t *src, size_t *n)
{
    source_catalog_t *s = (source_catalog_t *)src;
    *n = s->ncat;
    return s->zs;
}

static void stats(zone_source_t *src, zone_source_stats_t *out)
{
    source_catalog_t *s = (source_catalog_t *)src;
    size_t n = __atomic_load_n(&s->ncat, __ATOMIC_RELAXED);
    *out = (zone_source_stats_t){.running = n > 0, .connected = true, .zones = n};
}

static zone_source_t *new_source(const zone_source_env_t *env)
{
    source_catalog_t *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->base.ops = &source_catalog_ops;
    s->env = *env;
    return &s->base;
}

static void free_source(zone_source_t *src)
{
    source_catalog_t *s = (source_catalog_t *)src;
    for (size_t i = 0; i < s->ncat; i++)
        catalog_clear(&s->cat[i], &s->zs[i]);
    free(s->cat);
    free(s->zs);
    free(s);
}

const zone_source_ops_t source_catalog_ops = {
    .name = "catalogs",
    .what = "a new catalog version",
    .previous = "one",
    .new = new_source,
    .configure = configure,
    .wait_first = wait_first,
    .collect = collect,
    .zones = zones,
    .published = published,
    .stats = stats,
    .free = free_source,
};
