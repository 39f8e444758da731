/*
 * xfr_catalog.c — catalog zones consumed (xfr_catalog.h): each catalog's members as secondary
 * zones of the transfer service (struct zst with member_of set), decided under mu when a puller
 * brings the catalog's new version, kept across reloads (xfr_configure()) and restarts (the
 * member list and each member's copy in the catalog's directory).
 *
 * Every member event goes to the loader through hooks.member_in / member_gone while mu is held,
 * so events reach the loader in the order decided here; the hooks only queue (the loader's sink
 * takes its own lock briefly and never calls back into this service).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/log.h"
#include "tern/xfr/xfr_catalog.h"
#include "tern/zone/zone_file.h"

#include "xfr_int.h"
#include "xfr_tls.h"

/* ---- settings ------------------------------------------------------------------------------- */

/* g's primaries from n peers (keys named in each, looked up in keys; a peer's tls made into
 * its own context). 0, or TERN_ENOMEM / TERN_EINVAL (TLS files unusable now: logged, never the
 * primary reached in clear text). */
static int peers_index(struct catgroup *g, const config_xfr_peer_t *src, size_t n,
                       const tsig_key_t *keys, size_t nkeys)
{
    g->prim = calloc(n ? n : 1, sizeof(*g->prim));
    g->prim_key = calloc(n ? n : 1, sizeof(int));
    g->prim_tls = calloc(n ? n : 1, sizeof(*g->prim_tls));
    if (!g->prim || !g->prim_key || !g->prim_tls)
        return TERN_ENOMEM;
    for (size_t k = 0; k < n; k++) {
        g->prim[k] = src[k];
        g->prim[k].key = NULL;
        g->prim[k].tls = NULL; /* the config's; prim_tls is ours */
        g->prim_key[k] = xfr_key_index(keys, nkeys, src[k].key);
        char err[512];
        if (src[k].tls &&
            !(g->prim_tls[k] = xfr_tls_new(src[k].tls, src[k].text, err, sizeof(err)))) {
            log_err("xfr: catalog group %s: primary %s: TLS settings unusable: %s", g->name,
                    src[k].text, err);
            return TERN_EINVAL;
        }
        g->nprim = k + 1;
    }
    return 0;
}

struct catcfg *xfr_catalog_cfg_new(const config_catalog_consumer_t *cc, const tsig_key_t *keys,
                                   size_t nkeys)
{
    struct catcfg *c = calloc(1, sizeof(*c));
    if (!c || !(c->dir = strdup(cc->directory)) ||
        (cc->ngroups && !(c->groups = calloc(cc->ngroups, sizeof(*c->groups)))))
        goto fail;
    for (size_t i = 0; i < cc->ngroups; i++) {
        struct catgroup *g = &c->groups[c->ngroups++];
        if (!(g->name = strdup(cc->groups[i].name)) ||
            peers_index(g, cc->groups[i].primaries, cc->groups[i].nprimaries, keys, nkeys) < 0)
            goto fail;
    }
    return c;
fail:
    xfr_catalog_cfg_free(c);
    return NULL;
}

void xfr_catalog_cfg_free(struct catcfg *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->ngroups; i++) {
        free(c->groups[i].name);
        free(c->groups[i].prim);
        free(c->groups[i].prim_key);
        for (size_t k = 0; c->groups[i].prim_tls && k < c->groups[i].nprim; k++)
            xfr_tls_release(c->groups[i].prim_tls[k]);
        free(c->groups[i].prim_tls);
    }
    free(c->groups);
    free(c->dir);
    free(c);
}

/* m's primaries: its group's (cat's settings), else the catalog's own. 0 or TERN_ENOMEM (m's
 * stay as they were). */
static int member_prims(struct zst *m, const struct zst *cat)
{
    const config_xfr_peer_t *p = cat->prim;
    const int *pk = cat->prim_key;
    struct xfr_tls *const *pt = cat->prim_tls;
    size_t n = cat->nprim;
    for (size_t i = 0; m->member_group && i < cat->cat->ngroups; i++)
        if (strcmp(cat->cat->groups[i].name, m->member_group) == 0) {
            p = cat->cat->groups[i].prim;
            pk = cat->cat->groups[i].prim_key;
            pt = cat->cat->groups[i].prim_tls;
            n = cat->cat->groups[i].nprim;
        }
    config_xfr_peer_t *np = malloc((n ? n : 1) * sizeof(*np));
    int *nk = malloc((n ? n : 1) * sizeof(*nk));
    struct xfr_tls **nt = calloc(n ? n : 1, sizeof(*nt));
    if (!np || !nk || !nt) {
        free(np);
        free(nk);
        free(nt);
        return TERN_ENOMEM;
    }
    memcpy(np, p, n * sizeof(*np));
    memcpy(nk, pk, n * sizeof(*nk));
    /* XoT: a member reaches its primaries as the catalog (or its group) does, sharing the
     * context (one reference each) */
    for (size_t k = 0; pt && k < n; k++)
        nt[k] = pt[k] ? xfr_tls_retain(pt[k]) : NULL;
    for (size_t k = 0; m->prim_tls && k < m->nprim; k++)
        xfr_tls_release(m->prim_tls[k]);
    free(m->prim_tls);
    free(m->prim);
    free(m->prim_key);
    m->prim = np;
    m->prim_key = nk;
    m->prim_tls = nt;
    if (m->nprim != n || m->cur_prim >= n)
        m->cur_prim = 0;
    m->nprim = n;
    return 0;
}

/* *dst = a copy of s (NULL stays NULL). false: out of memory. */
static bool set_str(char **dst, const char *s)
{
    char *c = s ? strdup(s) : NULL;
    if (s && !c)
        return false;
    free(*dst);
    *dst = c;
    return true;
}

/* A member zone of catalog cat, as m lists it; gen: its member_gen. NULL when out of memory or
 * its name does not parse. */
static struct zst *member_new(const struct zst *cat, const xfr_catalog_member_t *m, uint64_t gen)
{
    struct zst *z = calloc(1, sizeof(*z));
    const char *why;
    int al;
    if (!z || !(z->key = strdup(m->zone)) ||
        (al = dname_from_str(m->zone, strlen(m->zone), false, z->apex, &why)) < 0)
        goto fail;
    z->apex_len = (size_t)al;
    z->transfer_key = -1;
    z->secondary = true;
    /* its base is its copy (loaded here) or nothing: never the version served, which may be
     * another source's zone of the same name */
    z->base_tried = true;
    z->member_gen = gen;
    if (!set_str(&z->member_of, cat->key) || !set_str(&z->member_id, m->id) ||
        !set_str(&z->member_group, m->group) || !set_str(&z->member_coo, m->coo) ||
        !(z->file = xfr_catalog_path(cat->cat->dir, m->zone, ".zone")) || member_prims(z, cat) < 0)
        goto fail;
    return z;
fail:
    xfr_zst_free(z);
    return NULL;
}

/* ---- hooks (under mu) --------------------------------------------------------------------- */

static void hook_in(xfr_t *x, const char *key, zone_t *z)
{
    if (x->hooks.member_in)
        x->hooks.member_in(x->hooks.member_ctx, key, z);
    else
        zone_free(z);
}

static void hook_gone(xfr_t *x, const char *key)
{
    if (x->hooks.member_gone)
        x->hooks.member_gone(x->hooks.member_ctx, key);
}

/* ---- startup and reloads ------------------------------------------------------------------ */

/* The members on disk of catalog cat, each with its copy as base, appended to *out. */
static int load_one(xfr_t *x, const struct zst *cat, struct zst ***out, size_t *nout, size_t *cap)
{
    char err[1024];
    char *path = xfr_catalog_path(cat->cat->dir, cat->key, ".members");
    if (!path)
        return TERN_ENOMEM;
    xfr_catalog_list_t l = {0};
    int rc = xfr_catalog_list_read(path, &l, err, sizeof(err));
    free(path);
    if (rc == TERN_ENOENT)
        return 0; /* a catalog never transferred yet */
    if (rc < 0) {
        log_err("xfr: catalog %s: its member list cannot be read (%s); its members wait for the "
                "catalog's transfer",
                cat->key, err);
        return rc == TERN_ENOMEM ? rc : 0;
    }
    size_t copies = 0;
    for (size_t i = 0; i < l.n && rc == 0; i++) {
        uint64_t gen = __atomic_add_fetch(&x->member_gens, 1, __ATOMIC_RELAXED);
        struct zst *z = member_new(cat, &l.m[i], gen);
        if (!z || tern_grow((void **)out, cap, *nout + 1, sizeof(**out)) < 0) {
            xfr_zst_free(z);
            rc = TERN_ENOMEM;
            break;
        }
        (*out)[(*nout)++] = z;
        if (access(z->file, F_OK) != 0)
            continue;
        if (zone_file_load(z->key, z->file, &z->base, err, sizeof(err)) < 0) {
            log_warn("xfr: catalog %s: member %s: its copy cannot be read (%s); waiting for a "
                     "transfer",
                     cat->key, z->key, err);
            z->base = NULL;
        } else {
            copies++;
        }
    }
    log_info("xfr: catalog %s: %zu members from %s, %zu served from their copies until the "
             "primary is asked",
             cat->key, l.n, cat->cat->dir, copies);
    xfr_catalog_list_clear(&l);
    return rc;
}

int xfr_catalog_load(xfr_t *x, struct zst *const *zs, size_t n, struct zst ***out, size_t *nout)
{
    size_t cap = 0;
    *out = NULL;
    *nout = 0;
    for (size_t i = 0; i < n; i++) {
        if (!zs[i]->cat)
            continue;
        pthread_mutex_lock(&x->mu);
        const struct zst *o = xfr_zone_find(x, zs[i]->key);
        bool followed = o && o->cat;
        pthread_mutex_unlock(&x->mu);
        if (!followed && mkdir(zs[i]->cat->dir, 0755) < 0 && errno != EEXIST)
            log_err("xfr: catalog %s: cannot make its directory %s: %s", zs[i]->key,
                    zs[i]->cat->dir, strerror(errno));
        if (!followed && load_one(x, zs[i], out, nout, &cap) < 0)
            return TERN_ENOMEM;
    }
    return 0;
}

int xfr_catalog_configure(xfr_t *x, struct zst ***zs, size_t *n, size_t *cap, struct zst **loaded,
                          size_t nloaded)
{
    int rc = 0;
    xfr_zmap_t m;
    xfr_zmap_init(&m, *zs, *n, x->nzones + nloaded);
    /* the members followed so far: kept while their catalog still is one */
    for (size_t i = 0; i < x->nzones; i++) {
        struct zst *o = x->zones[i];
        if (!o || !o->member_of)
            continue;
        struct zst *c = xfr_zmap_get(&m, o->member_of);
        const char *why = !c || !c->cat              ? "its catalog is no longer followed"
                          : xfr_zmap_get(&m, o->key) ? "the zone is configured in the file"
                                                     : NULL;
        if (!why &&
            (member_prims(o, c) < 0 || tern_grow((void **)zs, cap, *n + 1, sizeof(**zs)) < 0))
            why = "out of memory", rc = TERN_ENOMEM;
        if (why) {
            log_info("xfr: catalog %s: member %s retired: %s", o->member_of, o->key, why);
            hook_gone(x, o->key); /* freed with the old zone list */
            continue;
        }
        /* the catalog's directory may have changed: the next copy goes to the new one */
        char *file = xfr_catalog_path(c->cat->dir, o->key, ".zone");
        if (file && (!o->file || strcmp(file, o->file) != 0)) {
            free(o->file);
            o->file = file;
            file = NULL;
        }
        free(file);
        (*zs)[(*n)++] = o;
        xfr_zmap_put(&m, o, *zs, *n);
        x->zones[i] = NULL; /* moved: not freed with the old list */
    }
    /* the members read from disk for catalogs followed from now on */
    for (size_t i = 0; i < nloaded; i++) {
        struct zst *z = loaded[i];
        if (xfr_zmap_get(&m, z->key)) {
            log_warn("xfr: catalog %s: member %s is also configured in the file (or in another "
                     "catalog); that one is served",
                     z->member_of, z->key);
            xfr_zst_free(z);
            continue;
        }
        if (tern_grow((void **)zs, cap, *n + 1, sizeof(**zs)) < 0) {
            xfr_zst_free(z);
            rc = TERN_ENOMEM;
            continue;
        }
        (*zs)[(*n)++] = z;
        xfr_zmap_put(&m, z, *zs, *n);
        hook_in(x, z->key, z->base ? zone_retain(z->base) : NULL);
    }
    xfr_zmap_free(&m);
    return rc;
}

/* ---- a catalog's new version -------------------------------------------------------------- */

/* Under mu: zone i of x, a member, retired (why): the loader told, its copy removed, freed. */
static void retire(xfr_t *x, size_t i, const char *why)
{
    struct zst *z = x->zones[i];
    log_info("xfr: catalog %s: member %s retired: %s", z->member_of, z->key, why);
    hook_gone(x, z->key);
    if (z->file && unlink(z->file) < 0 && errno != ENOENT)
        log_warn("xfr: zone %s: cannot remove its copy %s: %s", z->key, z->file, strerror(errno));
    xfr_zst_free(z);
    x->zones[i] = x->zones[--x->nzones];
}

/* Under mu: member z's data dropped, to be transferred again at once (RFC 9432 §5.6: a new
 * unique id is a new zone). */
static void reset(xfr_t *x, struct zst *z, const char *old_id)
{
    log_info("xfr: catalog %s: member %s: unique id %s is now %s: its data is dropped and "
             "transferred again (RFC 9432 5.6)",
             z->member_of, z->key, old_id, z->member_id);
    zone_free(z->base);
    z->base = NULL;
    z->expired = false;
    z->expire_ms = z->next_ms = 0;
    z->expire_wall = z->refresh_wall = 0;
    z->member_gen = __atomic_add_fetch(&x->member_gens, 1, __ATOMIC_RELAXED);
    if (z->file && unlink(z->file) < 0 && errno != ENOENT)
        log_warn("xfr: zone %s: cannot remove its copy %s: %s", z->key, z->file, strerror(errno));
    hook_in(x, z->key, NULL);
}

/* Under mu: member m of catalog c, which x follows as z already. */
static void update_member(xfr_t *x, struct zst *c, struct zst *z, const xfr_catalog_member_t *m)
{
    if (strcmp(z->member_of, c->key) != 0) {
        /* RFC 9432 §5.4: a zone another catalog holds moves only when that catalog's coo
         * property for it names this one */
        if (!z->member_coo || strcmp(z->member_coo, c->key) != 0) {
            log_warn("xfr: catalog %s: zone %s is a member of catalog %s already (no coo to "
                     "%s); ignored here",
                     c->key, z->key, z->member_of, c->key);
            return;
        }
        log_info("xfr: zone %s moves from catalog %s to %s (coo)", z->key, z->member_of, c->key);
        if (!set_str(&z->member_of, c->key))
            return;
        char *file = xfr_catalog_path(c->cat->dir, z->key, ".zone");
        if (file) {
            free(z->file);
            z->file = file;
        }
    }
    bool new_id = strcmp(z->member_id, m->id) != 0;
    char old_id[DNAME_KEY_MAX];
    snprintf(old_id, sizeof(old_id), "%s", z->member_id);
    if (!set_str(&z->member_id, m->id) || !set_str(&z->member_group, m->group) ||
        !set_str(&z->member_coo, m->coo) || member_prims(z, c) < 0)
        log_err("xfr: catalog %s: member %s: out of memory; its settings stay", c->key, z->key);
    if (new_id)
        reset(x, z, old_id);
}

/* Under mu: catalog c's members are l's (parsed from its new version). */
static void apply(xfr_t *x, struct zst *c, const xfr_catalog_list_t *l)
{
    for (size_t i = x->nzones; i-- > 0;) {
        struct zst *z = x->zones[i];
        if (z->member_of && strcmp(z->member_of, c->key) == 0 && !xfr_catalog_list_find(l, z->key))
            retire(x, i, "no longer in the catalog");
    }
    xfr_zmap_t m;
    xfr_zmap_init(&m, x->zones, x->nzones, l->n);
    for (size_t i = 0; i < l->n; i++) {
        struct zst *z = xfr_zmap_get(&m, l->m[i].zone);
        if (z && !z->member_of) {
            log_warn("xfr: catalog %s: member %s is configured in the file; the configured zone "
                     "is served",
                     c->key, z->key);
        } else if (z) {
            update_member(x, c, z, &l->m[i]);
        } else {
            uint64_t gen = __atomic_add_fetch(&x->member_gens, 1, __ATOMIC_RELAXED);
            struct zst *n = member_new(c, &l->m[i], gen);
            if (!n ||
                tern_grow((void **)&x->zones, &x->capzones, x->nzones + 1, sizeof(*x->zones)) < 0) {
                log_err("xfr: catalog %s: member %s: out of memory; it waits for the next "
                        "refresh",
                        c->key, l->m[i].zone);
                xfr_zst_free(n);
                continue;
            }
            x->zones[x->nzones++] = n;
            xfr_zmap_put(&m, n, x->zones, x->nzones);
            log_info("xfr: catalog %s: member %s added (id %s%s%s)", c->key, n->key, n->member_id,
                     n->member_group ? ", group " : "", n->member_group ? n->member_group : "");
            hook_in(x, n->key, NULL);
        }
    }
    xfr_zmap_free(&m);
}

/* Under mu: catalog c's members as x follows them, written to its directory. */
static void write_list(xfr_t *x, const struct zst *c)
{
    xfr_catalog_list_t l = {0};
    char err[512];
    int rc = 0;
    for (size_t i = 0; i < x->nzones && rc == 0; i++) {
        const struct zst *z = x->zones[i];
        if (z->member_of && strcmp(z->member_of, c->key) == 0)
            rc = xfr_catalog_list_add(&l, z->key, z->member_id, z->member_group, z->member_coo);
    }
    char *path = rc == 0 ? xfr_catalog_path(c->cat->dir, c->key, ".members") : NULL;
    if (!path)
        log_err("xfr: catalog %s: out of memory; its member list on disk is not updated", c->key);
    else if (xfr_catalog_list_write(&l, path, err, sizeof(err)) < 0)
        log_err("xfr: catalog %s: cannot write its member list: %s", c->key, err);
    free(path);
    xfr_catalog_list_clear(&l);
}

void xfr_catalog_refreshed(xfr_t *x, const char *key, const zone_t *v)
{
    xfr_catalog_list_t l = {0};
    char err[1024];
    if (xfr_catalog_parse(v, &l, err, sizeof(err)) < 0) {
        log_err("xfr: %s; serial %u refused, the members in force stay", err, v->serial);
        return;
    }
    pthread_mutex_lock(&x->mu);
    struct zst *c = xfr_zone_find(x, key);
    if (c && c->cat) {
        c->cat->parsed = true;
        apply(x, c, &l);
        write_list(x, c);
        log_info("xfr: catalog %s: serial %u, %zu members", key, v->serial, l.n);
    }
    pthread_mutex_unlock(&x->mu);
    xfr_catalog_list_clear(&l);
    if (x->started) /* pullers for the new members (none before xfr_start()) */
        xfr_secondary_grow(x);
}
