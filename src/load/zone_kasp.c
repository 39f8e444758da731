/*
 * zone_kasp.c — see zone_kasp.h.
 */
#include "zone_kasp.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "tern/common/err.h"
#include "tern/common/grow.h"
#include "tern/common/log.h"
#include "tern/dnssec/dnssec_kasp.h"
#include "tern/dnssec/dnssec_zone.h"
#include "tern/wire/dname.h"

#include "ds_check.h"

/* The zone_max_ttl a zone's rollovers wait for before its first build says what it is: a day,
 * the policy default, errs on the slow side. */
#define MAX_TTL_UNKNOWN 86400

struct zent_kasp {
    char *key;
    dnssec_kasp_t *st;        /* NULL until its first prepare */
    dnssec_kasp_policy_t pol; /* as of its last prepare */
    bool have_pol;
    uint32_t max_ttl;    /* the zone's largest TTL at its last build; 0: not built */
    int64_t next_event;  /* 0: none */
    char *status;        /* dnssec_kasp_status_text() of the last prepare */
    char path[PATH_MAX]; /* its state file */
    uint16_t wanted[4];  /* the DS the last plan wants */
    size_t nwanted;
    bool gone_wanted; /* unsigning: the parent's DS is to go (CDS DELETE published) */
    bool unsaved;     /* made by this process, not in its file yet */
    /* what the last step left, for the metrics (gauge.zone unset: copied with the name) */
    loader_dnssec_keys_t gauge;
    bool stepped;
};

struct zone_kasp {
    pthread_mutex_t mu;
    struct zent_kasp *e;
    size_t n, cap;
    ds_check_t *dc; /* asks the parents for the DS a zone waits for; NULL: none */
};

void zone_kasp_set_checker(zone_kasp_t *k, ds_check_t *dc)
{
    k->dc = dc;
}

zone_kasp_t *zone_kasp_new(void)
{
    zone_kasp_t *k = calloc(1, sizeof(*k));
    if (k)
        pthread_mutex_init(&k->mu, NULL);
    return k;
}

static void entry_free(struct zent_kasp *e)
{
    free(e->key);
    dnssec_kasp_free(e->st);
    free(e->status);
}

void zone_kasp_free(zone_kasp_t *k)
{
    if (!k)
        return;
    for (size_t i = 0; i < k->n; i++)
        entry_free(&k->e[i]);
    free(k->e);
    pthread_mutex_destroy(&k->mu);
    free(k);
}

/* Under mu: the entry of key, made on first sight (NULL: out of memory). */
static struct zent_kasp *entry(zone_kasp_t *k, const char *key, bool make)
{
    for (size_t i = 0; i < k->n; i++)
        if (strcmp(k->e[i].key, key) == 0)
            return &k->e[i];
    if (!make || tern_grow((void **)&k->e, &k->cap, k->n + 1, sizeof(*k->e)) < 0)
        return NULL;
    struct zent_kasp *e = &k->e[k->n];
    memset(e, 0, sizeof(*e));
    if (!(e->key = strdup(key)))
        return NULL;
    k->n++;
    return e;
}

/* dir and dir/keys, made when missing (0700: private keys live there). */
static int make_dirs(const char *dir, char *keys, size_t klen, char *err, size_t errlen)
{
    if ((size_t)snprintf(keys, klen, "%s/keys", dir) >= klen) {
        snprintf(err, errlen, "dnssec_state_dir %s: path too long", dir);
        return TERN_ENOSPC;
    }
    const char *paths[2] = {dir, keys};
    for (int i = 0; i < 2; i++)
        if (mkdir(paths[i], 0700) < 0 && errno != EEXIST) {
            int e = errno;
            snprintf(err, errlen, "dnssec_state_dir: cannot make %s: %s", paths[i], strerror(e));
            return -e;
        }
    return 0;
}

/* The state directory's keys/ as the zone's key store: BIND files, a key's id its file stem. */
struct file_store {
    const char *kdir;
    const uint8_t *origin; /* the zone's wire name: a key read must be the zone's */
};

static int file_put(void *ctx, const dnssec_key_t *key, char *id, size_t idlen, char *err,
                    size_t errlen)
{
    const struct file_store *fs = ctx;
    char stem[PATH_MAX];
    int rc = dnssec_key_write(key, fs->kdir, stem, sizeof(stem), err, errlen);
    if (rc == 0)
        snprintf(id, idlen, "%s", strrchr(stem, '/') ? strrchr(stem, '/') + 1 : stem);
    return rc;
}

static int file_get(void *ctx, const char *id, dnssec_key_t **out, char *err, size_t errlen)
{
    const struct file_store *fs = ctx;
    char path[PATH_MAX + DNSSEC_KASP_ID_MAX + 2];
    snprintf(path, sizeof(path), "%s/%s", fs->kdir, id);
    return dnssec_key_load(path, fs->origin, out, err, errlen);
}

/* Under mu: what e's plan waits for at its parent, to the checker (its policy's parents). */
static void want_ds(zone_kasp_t *k, struct zent_kasp *e, const config_dnssec_policy_t *cp,
                    const char *origin, const dnssec_kasp_plan_t *plan, const uint8_t *wo,
                    const char *kdir)
{
    struct file_store fs = {kdir, wo};
    const dnssec_kasp_store_t store = {file_put, file_get, &fs};
    ds_check_want_t wants[DNSSEC_KASP_DS_MAX] = {{0}};
    size_t n = 0;
    if (e->gone_wanted) /* unsigning: the whole DS RRset is to go (RFC 8078); no DS is wanted */
        wants[n++] = (ds_check_want_t){.gone = true};
    else if (cp->nparents)
        n = dnssec_kasp_keys_ds(plan, &e->pol, e->key, &store, wants);
    if (k->dc)
        ds_check_set(k->dc, e->key, origin, wants, n, cp->parents, cp->nparents,
                     cp->ds_check_interval);
}

/* Under mu: e's gauges from the plan of its step (every key of its state, removed ones too). */
static void gauge_set(struct zent_kasp *e, const dnssec_kasp_plan_t *plan)
{
    memset(&e->gauge, 0, sizeof(e->gauge));
    for (size_t i = 0; i < plan->nkeys; i++) {
        const dnssec_kasp_plan_key_t *p = &plan->keys[i];
        if ((unsigned)p->role < LOADER_DNSSEC_ROLES && (unsigned)p->state < DNSSEC_KASP_STATE_COUNT)
            e->gauge.count[p->role][p->state]++;
    }
    e->gauge.next_event = plan->next_event;
    e->gauge.ds_wanted = plan->nds_wanted > 0;
    e->stepped = true;
}

/* Under mu: step e to now (generating what the plan asks for), log and save; *plan filled. */
static int step(struct zent_kasp *e, const uint8_t *origin, const char *kdir, int64_t now,
                dnssec_kasp_plan_t *plan, char *err, size_t errlen)
{
    struct file_store fs = {kdir, origin};
    const dnssec_kasp_store_t store = {file_put, file_get, &fs};
    bool changed;
    int rc = dnssec_kasp_keys_step(e->st, &e->pol, e->key, origin, now, &store, plan, &changed, err,
                                   errlen);
    if (rc < 0)
        return rc;
    changed = changed || e->unsaved; /* a new state; else a transition or a key made */
    char serr[512];
    if (changed && (rc = dnssec_kasp_save(e->st, e->path, serr, sizeof(serr))) < 0) {
        snprintf(err, errlen, "zone %s: dnssec: %s", e->key, serr);
        return rc;
    }
    e->unsaved = false;
    e->next_event = plan->next_event;
    int64_t gone;
    e->gone_wanted = plan->cds_delete && dnssec_kasp_unsigning(e->st, &gone) && !gone;
    e->nwanted = plan->nds_wanted < 4 ? plan->nds_wanted : 4;
    memcpy(e->wanted, plan->ds_wanted, e->nwanted * sizeof(*e->wanted));
    for (size_t i = 0; i < e->nwanted; i++)
        log_debug("dnssec: zone %s: waiting for the DS of key %u at the parent", e->key,
                  e->wanted[i]);
    gauge_set(e, plan);
    char *text = dnssec_kasp_status_text(e->st, &e->pol, now);
    if (text) {
        free(e->status);
        e->status = text;
    }
    return 0;
}

/* Under mu: zone e against its unsign setting (dnssec: {policy, unsign: true}; the rules are
 * dnssec_kasp_keys_unsign_step()'s): *skip when the zone is to be served unsigned with no key
 * made. */
static int follow_unsign(struct zent_kasp *e, const config_zone_t *cz, int64_t now, bool *skip,
                         char *err, size_t errlen)
{
    dnssec_kasp_unsign_step_t step = dnssec_kasp_keys_unsign_step(e->st, cz->dnssec_unsign);
    *skip = step == DNSSEC_KASP_UNSIGN_NO_KEYS;
    bool changed = false;
    int rc =
        dnssec_kasp_keys_unsign(&e->st, step, e->key, "unsign: true", now, &changed, err, errlen);
    e->unsaved = e->unsaved || changed;
    return rc;
}

int zone_kasp_prepare(zone_kasp_t *k, const char *key, const config_zone_t *cz, const config_t *cfg,
                      int64_t now, zone_kasp_keys_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    const config_dnssec_policy_t *cp = config_dnssec_policy_find(cfg, cz->dnssec_policy);
    char dbuf[PATH_MAX], kdir[PATH_MAX];
    const char *dir = config_dnssec_state_dir(cfg, dbuf, sizeof(dbuf));
    uint8_t origin[DNAME_MAXLEN];
    if (!cp || !dir) { /* config_dnssec_check() refuses such a config */
        snprintf(err, errlen, "zone %s: dnssec: no policy \"%s\" or no dnssec_state_dir", key,
                 cz->dnssec_policy ? cz->dnssec_policy : "");
        return TERN_EINVAL;
    }
    if (dname_from_str(cz->origin, strlen(cz->origin), false, origin, NULL) < 0) {
        snprintf(err, errlen, "zone %s: bad origin", cz->origin);
        return TERN_EINVAL;
    }
    int rc = make_dirs(dir, kdir, sizeof(kdir), err, errlen);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&k->mu);
    struct zent_kasp *e = entry(k, key, true);
    dnssec_kasp_plan_t *plan = calloc(1, sizeof(*plan));
    if (!e || !plan) {
        rc = TERN_ENOMEM;
        snprintf(err, errlen, "zone %s: out of memory", key);
        goto out;
    }
    config_dnssec_policy_kasp(cp, &e->pol);
    e->pol.zone_max_ttl = cp->zone_max_ttl ? cp->zone_max_ttl
                          : e->max_ttl     ? e->max_ttl
                                           : MAX_TTL_UNKNOWN;
    e->have_pol = true;
    if (!e->st) {
        char lerr[512];
        snprintf(e->path, sizeof(e->path), "%s/%s.kasp", dir, key);
        rc = dnssec_kasp_load(e->path, &e->st, lerr, sizeof(lerr));
        if (rc == TERN_ENOENT) {
            log_info("dnssec: zone %s: no key state yet (%s): signing it from scratch", key,
                     e->path);
            rc = (e->st = dnssec_kasp_new()) ? 0 : TERN_ENOMEM;
            e->unsaved = true;
        } else if (rc < 0) {
            snprintf(err, errlen, "zone %s: dnssec: %s", key, lerr);
            goto out;
        }
    }
    bool skip = false;
    if (rc == 0)
        rc = follow_unsign(e, cz, now, &skip, err, errlen);
    if (rc == 0 && skip) {
        free(e->status);
        e->status = strdup("unsigned (unsign: true, no key was made)\n");
        goto out; /* *out is empty: served unsigned */
    }
    if (rc == 0)
        rc = step(e, origin, kdir, now, plan, err, errlen);
    if (rc == 0)
        want_ds(k, e, cp, cz->origin, plan, origin, kdir);
    if (rc == 0) {
        struct file_store fs = {kdir, origin};
        const dnssec_kasp_store_t store = {file_put, file_get, &fs};
        rc = dnssec_kasp_keys_load(plan, &e->pol, e->key, &store, out, err, errlen);
    }
out:
    pthread_mutex_unlock(&k->mu);
    free(plan);
    if (rc < 0)
        dnssec_kasp_keys_release(out);
    return rc;
}

void zone_kasp_built(zone_kasp_t *k, const char *key, const zone_t *z)
{
    uint32_t max = zone_max_ttl(z);
    pthread_mutex_lock(&k->mu);
    struct zent_kasp *e = entry(k, key, false);
    if (e)
        e->max_ttl = max;
    pthread_mutex_unlock(&k->mu);
}

int64_t zone_kasp_next(zone_kasp_t *k)
{
    int64_t next = 0;
    pthread_mutex_lock(&k->mu);
    for (size_t i = 0; i < k->n; i++)
        if (k->e[i].next_event && (!next || k->e[i].next_event < next))
            next = k->e[i].next_event;
    pthread_mutex_unlock(&k->mu);
    return next;
}

void zone_kasp_due(zone_kasp_t *k, int64_t now, void (*fn)(void *ctx, const char *key), void *ctx)
{
    /* fn is called without mu held: it takes the loader's lock, which is held around
     * zone_kasp_next() (one lock order) */
    char **due = NULL;
    size_t n = 0;
    pthread_mutex_lock(&k->mu);
    if (k->n && (due = calloc(k->n, sizeof(*due))))
        for (size_t i = 0; i < k->n; i++)
            if (k->e[i].next_event && k->e[i].next_event <= now && (due[n] = strdup(k->e[i].key))) {
                k->e[i].next_event = 0; /* asked once: the build sets the next */
                n++;
            }
    pthread_mutex_unlock(&k->mu);
    for (size_t i = 0; i < n; i++) {
        fn(ctx, due[i]);
        free(due[i]);
    }
    free(due);
}

void zone_kasp_retain(zone_kasp_t *k, const config_t *cfg)
{
    pthread_mutex_lock(&k->mu);
    for (size_t i = 0; i < k->n;) {
        bool keep = false;
        for (size_t z = 0; z < cfg->nzones && !keep; z++) {
            char ck[DNAME_KEY_MAX];
            const char *why;
            keep = cfg->zones[z].dnssec_policy &&
                   dname_key(cfg->zones[z].origin, ck, sizeof(ck), &why) >= 0 &&
                   strcmp(ck, k->e[i].key) == 0;
        }
        if (keep) {
            i++;
            continue;
        }
        entry_free(&k->e[i]);
        k->e[i] = k->e[--k->n];
    }
    pthread_mutex_unlock(&k->mu);
}

char *zone_kasp_status(zone_kasp_t *k, const char *key, char *err, size_t errlen)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    size_t shown = 0;
    pthread_mutex_lock(&k->mu);
    for (size_t i = 0; i < k->n; i++) {
        const struct zent_kasp *e = &k->e[i];
        if (key && strcmp(key, e->key) != 0)
            continue;
        fprintf(f, "zone: %s\n%s", e->key, e->status ? e->status : "not signed yet\n");
        for (size_t w = 0; w < e->nwanted; w++)
            fprintf(f, "ds_wanted: %u (ternctl dnssec ds-seen %s %u once the parent has it)\n",
                    e->wanted[w], e->key, e->wanted[w]);
        if (e->gone_wanted)
            fprintf(f,
                    "ds_gone_wanted: yes (ternctl dnssec ds-gone %s once the parent has no "
                    "DS)\n",
                    e->key);
        shown++;
    }
    pthread_mutex_unlock(&k->mu);
    if (fclose(f) != 0) {
        free(out);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (!shown) {
        free(out);
        snprintf(err, errlen, key ? "zone %s has no dnssec policy" : "no zone has a dnssec policy",
                 key);
        return NULL;
    }
    return out;
}

/* Under mu: the entry of a managed zone that has been prepared, or NULL with err set. */
static struct zent_kasp *prepared(zone_kasp_t *k, const char *key, char *err, size_t errlen)
{
    struct zent_kasp *e = entry(k, key, false);
    if (!e || !e->st || !e->have_pol)
        snprintf(err, errlen, "zone %s has no dnssec policy (or is not loaded yet)", key);
    return e && e->st && e->have_pol ? e : NULL;
}

static int save(struct zent_kasp *e, char *err, size_t errlen)
{
    char serr[512];
    int rc = dnssec_kasp_save(e->st, e->path, serr, sizeof(serr));
    if (rc < 0)
        snprintf(err, errlen, "%s", serr);
    return rc;
}

int zone_kasp_rollover(zone_kasp_t *k, const char *key, const char *role, int64_t now, char *err,
                       size_t errlen)
{
    dnssec_kasp_role_t r;
    if (dnssec_kasp_keys_role(role, &r, err, errlen) < 0)
        return TERN_EINVAL;
    pthread_mutex_lock(&k->mu);
    struct zent_kasp *e = prepared(k, key, err, errlen);
    int rc = e ? dnssec_kasp_rollover(e->st, &e->pol, r, now, err, errlen) : TERN_ENOENT;
    if (rc == 0) {
        log_info("dnssec: zone %s: %s rollover asked for", key, dnssec_kasp_role_name(r));
        rc = save(e, err, errlen);
    }
    pthread_mutex_unlock(&k->mu);
    return rc;
}

int zone_kasp_ds_seen(zone_kasp_t *k, const char *key, int tag, int64_t now, bool by_operator,
                      char *err, size_t errlen)
{
    pthread_mutex_lock(&k->mu);
    struct zent_kasp *e = prepared(k, key, err, errlen);
    int rc = e ? 0 : TERN_ENOENT;
    if (e && tag < 0 && !e->nwanted) {
        snprintf(err, errlen, "zone %s waits for no DS", key);
        rc = TERN_ENOENT;
    }
    for (size_t i = 0; e && rc == 0 && tag < 0 && i < e->nwanted; i++)
        rc = dnssec_kasp_ds_seen(e->st, e->wanted[i], now, err, errlen);
    if (e && rc == 0 && tag >= 0)
        rc = dnssec_kasp_ds_seen(e->st, (uint16_t)tag, now, err, errlen);
    if (rc == 0) {
        log_info("dnssec: zone %s: DS %s seen at the parent (%s)", key,
                 tag < 0 ? "of every KSK waiting" : "of the key",
                 by_operator ? "said by the operator" : "seen at its servers");
        rc = save(e, err, errlen);
    }
    pthread_mutex_unlock(&k->mu);
    return rc;
}

int zone_kasp_ds_gone(zone_kasp_t *k, const char *key, int64_t now, bool by_operator, char *err,
                      size_t errlen)
{
    pthread_mutex_lock(&k->mu);
    struct zent_kasp *e = prepared(k, key, err, errlen);
    int rc = e ? dnssec_kasp_ds_gone(e->st, now, err, errlen) : TERN_ENOENT;
    if (rc == 0) {
        log_info("dnssec: zone %s: the parent's DS is gone (%s)", key,
                 by_operator ? "said by the operator" : "seen at its servers");
        e->gone_wanted = false;
        rc = save(e, err, errlen);
    }
    pthread_mutex_unlock(&k->mu);
    return rc;
}

bool zone_kasp_signing(zone_kasp_t *k, const char *key)
{
    pthread_mutex_lock(&k->mu);
    struct zent_kasp *e = entry(k, key, false);
    bool on = e && e->st && dnssec_kasp_in_use(e->st);
    pthread_mutex_unlock(&k->mu);
    return on;
}

int zone_kasp_gauges(zone_kasp_t *k, loader_dnssec_keys_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&k->mu);
    /* one block: the entries, then their names (one free() for the reader) */
    size_t count = 0, names = 0;
    for (size_t i = 0; i < k->n; i++)
        if (k->e[i].stepped) {
            count++;
            names += strlen(k->e[i].key) + 1;
        }
    loader_dnssec_keys_t *g = count ? malloc(count * sizeof(*g) + names) : NULL;
    if (g) {
        char *name = (char *)(g + count);
        for (size_t i = 0, j = 0; i < k->n; i++) {
            if (!k->e[i].stepped)
                continue;
            size_t len = strlen(k->e[i].key) + 1;
            g[j] = k->e[i].gauge;
            g[j++].zone = memcpy(name, k->e[i].key, len);
            name += len;
        }
    }
    pthread_mutex_unlock(&k->mu);
    if (count && !g)
        return TERN_ENOMEM;
    *out = g;
    *n = count;
    return 0;
}
